"""laguna_gate.py's command line: the whole gate against a URL, or (--kit-dir, on a box) against
the current release with the gate parameters it was released with; the JSON result written to
--result and printed; exit 0 only when every check passed."""

from __future__ import annotations

import argparse
import json
import os

from .failure import log
from .run import run_gate


def container_of(argv: list[str]) -> str | None:
    """The container a release runs (`docker run --name NAME` in its argv)."""
    for flag, value in zip(argv, argv[1:]):
        if flag == "--name":
            return value
    return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description="readiness + smoke + fresh long-context gate (+ DFlash check)"
    )
    p.add_argument("--url", default="http://127.0.0.1:8080/v1")
    p.add_argument("--model", default="laguna")
    p.add_argument("--prompt-tokens", dest="prompt_tokens", type=int, default=190000)
    p.add_argument("--max-tokens", dest="max_tokens", type=int, default=32)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--ready-timeout", dest="ready_timeout", type=float, default=900)
    p.add_argument("--unit", help="systemd unit to watch while waiting (on the box)")
    p.add_argument("--dflash", action="store_true", help="check speculative-decoding acceptance")
    p.add_argument("--min-acceptance", dest="min_acceptance", type=float, default=0.2)
    p.add_argument(
        "--bench-tokens",
        dest="bench_tokens",
        type=int,
        default=500,
        help="the recipe's benchmark: a short prompt, this many output tokens (0: none)",
    )
    p.add_argument(
        "--min-decode-ratio",
        dest="min_decode_ratio",
        type=float,
        default=0.8,
        help="fail when decode is below this x the baseline's",
    )
    p.add_argument(
        "--baseline",
        type=json.loads,
        default=None,
        help='JSON {"release": N, "decode_tok_s": X, "mode": M}: the figure to hold (with '
        "--kit-dir: the previous passing release of the same mode on this box)",
    )
    p.add_argument(
        "--force-slower",
        dest="force_slower",
        action="store_true",
        help="accept a release slower than min_decode_ratio allows",
    )
    p.add_argument("--release", type=int)
    p.add_argument(
        "--kit-dir", help="on a box: take the URL and every gate parameter from the current release"
    )
    p.add_argument("--state-dir", help="with --kit-dir: a replica's own releases")
    p.add_argument("--result", help="write the JSON result here")
    p.add_argument("--container", help="the container whose processes alone may listen on the port")
    args = p.parse_args(argv)
    if args.kit_dir:
        from ..release.store import Store  # the release manager's own layout

        rel = Store(args.kit_dir, args.unit or "", args.state_dir)
        current = rel.current_meta()
        if not (current.get("spec") or {}).get("gate"):
            log(f"GATE FAILED: no current release to validate under {args.kit_dir}")
            return 1
        args.release = current.get("number")
        args.container = container_of(current["spec"].get("argv") or [])
        args.mode = current["spec"].get("mode")
        for key, value in current["spec"]["gate"].items():
            setattr(args, key, value)
        if args.baseline is None:
            args.baseline = rel.perf_baseline(args.release)
    result = run_gate(args)
    if args.result:
        os.makedirs(os.path.dirname(args.result) or ".", exist_ok=True)  # a new replica's first
        with open(args.result, "w") as fh:
            json.dump(result, fh, indent=1)
    print(json.dumps(result))
    if not result["passed"]:
        log(
            f"GATE FAILED{' on release ' + str(args.release) if args.release else ''}: "
            f"{result['error']}"
        )
        return 1
    return 0
