#!/usr/bin/env python3
"""laguna-release: numbered releases of the serving unit on this box, and switching between them.

    laguna_release.py list                 releases, the current one marked
    laguna_release.py install-incoming     number the release the deploy uploaded and activate it
    laguna_release.py activate N           run release N
    laguna_release.py rollback [--to N]    run the previous release (or N)
    laguna_release.py stop                 stop serving (the unit stays installed)

A release folder holds release.json (what ran: mode, image digest, revisions, flags, time) and the
unit file. Activating installs the unit, runs `systemctl daemon-reload` only when the unit file
really changed (a reload can detach GPUs from running containers), and restarts the service.
Validate after every activation: the deploy runs the gate; by hand, laguna_gate.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

UNIT_DIR = "/etc/systemd/system"


class ReleaseError(Exception):
    pass


class Releases:
    def __init__(self, kit_dir: str, unit: str):
        self.root = os.path.join(kit_dir, "releases")
        self.unit = unit
        self.state_path = os.path.join(self.root, "state.json")

    def state(self) -> dict:
        try:
            with open(self.state_path) as fh:
                return json.load(fh)
        except (OSError, ValueError):
            return {"current": None, "previous": None, "history": []}

    def save(self, state: dict) -> None:
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(state, fh, indent=1)
        os.replace(tmp, self.state_path)

    def numbers(self) -> list[int]:
        if not os.path.isdir(self.root):
            return []
        return sorted(int(n) for n in os.listdir(self.root) if n.isdigit())

    def folder(self, n: int) -> str:
        return os.path.join(self.root, f"{n:04d}")

    def meta(self, n: int) -> dict:
        with open(os.path.join(self.folder(n), "release.json")) as fh:
            return json.load(fh)

    def install_incoming(self) -> int:
        incoming = os.path.join(self.root, "incoming")
        if not os.path.isdir(incoming):
            raise ReleaseError("no incoming release to install")
        n = (self.numbers() or [0])[-1] + 1
        meta_path = os.path.join(incoming, "release.json")
        with open(meta_path) as fh:
            meta = json.load(fh)
        meta.update(number=n, created=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        with open(meta_path, "w") as fh:
            json.dump(meta, fh, indent=1)
        unit_path = os.path.join(incoming, self.unit)
        with open(unit_path) as fh:
            text = fh.read().replace("@RELEASE@", str(n))
        with open(unit_path, "w") as fh:
            fh.write(text)
        os.rename(incoming, self.folder(n))
        self.activate(n)
        return n

    def activate(self, n: int) -> None:
        if n not in self.numbers():
            raise ReleaseError(f"no release {n}; have {self.numbers()}")
        src = os.path.join(self.folder(n), self.unit)
        dest = os.path.join(UNIT_DIR, self.unit)
        with open(src) as fh:
            wanted = fh.read()
        try:
            with open(dest) as fh:
                changed = fh.read() != wanted
        except FileNotFoundError:
            changed = True
        if changed:
            tmp = dest + ".laguna-tmp"
            with open(tmp, "w") as fh:
                fh.write(wanted)
            os.replace(tmp, dest)
            run("systemctl", "daemon-reload")
        run("systemctl", "enable", "--quiet", self.unit)
        run("systemctl", "reset-failed", self.unit, check=False)
        run("systemctl", "restart", self.unit)
        state = self.state()
        if state.get("current") != n:
            state["previous"] = state.get("current")
        state["current"] = n
        state.setdefault("history", []).append({"release": n, "activated": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        self.save(state)
        print(f"release {n} active ({self.meta(n).get('mode')}, {self.meta(n).get('image')})")

    def rollback(self, to: int | None) -> int:
        state = self.state()
        target = to if to is not None else state.get("previous")
        if target is None:
            current = state.get("current")
            older = [n for n in self.numbers() if current is None or n < current]
            target = older[-1] if older else None
        if target is None:
            raise ReleaseError("no previous release to roll back to")
        if target == state.get("current"):
            raise ReleaseError(f"release {target} is already current")
        self.activate(target)
        print(f"rolled back to release {target}")
        return target


def run(*cmd: str, check: bool = True) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise ReleaseError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kit-dir", default="/opt/laguna-kit")
    p.add_argument("--unit", default="laguna-vllm.service")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list")
    sub.add_parser("install-incoming")
    sub.add_parser("stop")
    act = sub.add_parser("activate")
    act.add_argument("number", type=int)
    rb = sub.add_parser("rollback")
    rb.add_argument("--to", type=int)
    args = p.parse_args(argv)
    rel = Releases(args.kit_dir, args.unit)
    try:
        if args.cmd == "list":
            state = rel.state()
            for n in rel.numbers():
                m = rel.meta(n)
                mark = "*" if n == state.get("current") else " "
                print(f"{mark} {n:4d}  {m.get('created')}  {m.get('mode'):14s} {m.get('image')}  "
                      f"target {str(m.get('target_revision'))[:12]}  drafter {str(m.get('drafter_revision'))[:12]}")
        elif args.cmd == "install-incoming":
            rel.install_incoming()
        elif args.cmd == "activate":
            rel.activate(args.number)
        elif args.cmd == "rollback":
            rel.rollback(args.to)
        elif args.cmd == "stop":
            run("systemctl", "stop", args.unit)
    except ReleaseError as exc:
        print(f"laguna-release: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
