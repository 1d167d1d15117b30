"""laguna_release.py's command line (see the package's docstring for its commands)."""

from __future__ import annotations

import argparse
import json
import sys

from ..layout import ROUTER_AGENT
from . import activate, drain, prune, snapshot, system, validate
from .store import Store
from .system import ReleaseError


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="laguna-release: numbered releases of the serving unit on this box, and "
        "switching between them."
    )
    p.add_argument("--kit-dir", default="/opt/laguna-kit")
    p.add_argument("--unit", default="laguna-vllm.service")
    p.add_argument("--state-dir", help="a replica's own releases (default: --kit-dir)")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list")
    st = sub.add_parser("state")
    st.add_argument("--json", action="store_true", required=True)
    pr = sub.add_parser("prune")
    pr.add_argument("--keep", type=int, required=True)
    sub.add_parser("install-incoming")
    sub.add_parser("stop")
    sub.add_parser("drain")
    und = sub.add_parser("undrain")
    und.add_argument("--kit", action="store_true", help="only the kit's drain")
    act = sub.add_parser("activate")
    act.add_argument("number", type=int)
    rb = sub.add_parser("rollback")
    rb_to = rb.add_mutually_exclusive_group()
    rb_to.add_argument("--to", type=int)
    rb_to.add_argument("--like", type=int, help="replica 1's release number")
    va = sub.add_parser("validate")
    va.add_argument("--auto-rollback", action="store_true")
    va.add_argument(
        "--force-slower", action="store_true", help="accept a release slower than the last one"
    )
    return p


def command(store: Store, args) -> int:
    """Run one command; its exit status."""
    if args.cmd == "list":
        print("\n".join(store.listing()))
    elif args.cmd == "state":
        print(json.dumps(snapshot.snapshot(store)))
    elif args.cmd == "prune":
        prune.prune(store, args.keep)
    elif args.cmd == "install-incoming":
        activate.install_incoming(store)
    elif args.cmd == "activate":
        activate.activate(store, args.number)
    elif args.cmd == "rollback" and args.like is not None:
        activate.like(store, args.like)
    elif args.cmd == "rollback":
        activate.rollback(store, args.to)
    elif args.cmd == "validate":
        return 0 if validate.validate(store, args.auto_rollback, args.force_slower) else 1
    elif args.cmd == "stop":
        drain.drain(store, "stopped")
        system.run("systemctl", "stop", args.unit)
    elif args.cmd == "drain":
        if store.agent() is None:
            raise ReleaseError(f"no fleet router here (no {ROUTER_AGENT}): nothing to drain")
        drain.drain(store, "drained by an operator", by="operator")
        print("drained: the fleet router sends this box nothing new; running requests ended")
    elif args.cmd == "undrain" and args.kit:
        drain.undrain(store)
    elif args.cmd == "undrain":
        drain.undrain(store, by="operator")
        print("undrained: the fleet router sends this box requests again (when /health passes)")
    return 0


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    store = Store(args.kit_dir, args.unit, args.state_dir)
    try:
        return command(store, args)
    except ReleaseError as exc:
        print(f"laguna-release: {exc}", file=sys.stderr)
        return 2
