"""The command-line clients' (scripts/smoke_test.py, long_context_gate.py, benchmark.py) way to a
box's own port or to the fleet's router: the router wants an API key (Authorization: Bearer) and
keeps a session on one box by its session header."""

from __future__ import annotations

import argparse
import os

from ..knobs.declared import defaults
from ..knobs.shapes import HEADER, NO_CONTROL


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--api-key",
        default=os.environ.get("LAGUNA_API_KEY", ""),
        help="the router's API key (default: $LAGUNA_API_KEY); a box's own port needs none",
    )
    p.add_argument("--session", default="", help="a session id: the router keeps it on one box")
    p.add_argument(
        "--session-header",
        default=defaults()["router_session_header"],
        help="the router's session header (default: the knob router_session_header's)",
    )


def headers(args) -> dict:
    bad = HEADER(args.session_header)
    if bad:
        raise SystemExit(f"--session-header {args.session_header!r} {bad}")
    out = {}
    if args.api_key:
        if any(c.isspace() or ord(c) < 0x20 for c in args.api_key):
            raise SystemExit("--api-key holds spaces or control characters")
        out["Authorization"] = f"Bearer {args.api_key}"
    if args.session:
        bad = NO_CONTROL(args.session)
        if bad:
            raise SystemExit(f"--session {bad}")
        out[args.session_header] = args.session
    return out
