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
VERIFIED_RECORD = ".laguna-verified.json"  # written by laguna_fetch.py in each checkpoint folder
STASH = ".laguna-revisions"  # beside the checkpoint folders: other revisions, kept for rollback


class ReleaseError(Exception):
    pass


# --- checkpoint revisions -------------------------------------------------------------------------
# A checkpoint folder (model_dir/<repo name>) holds one verified revision; the others a release may
# need are kept whole in model_dir/.laguna-revisions/<name>@<commit>, so switching is two renames on
# one filesystem and the container's paths stay the recipe's.

def recorded_revision(dest: str) -> str | None:
    try:
        with open(os.path.join(dest, VERIFIED_RECORD)) as fh:
            return json.load(fh).get("revision")
    except (OSError, ValueError):
        return None


def stash_path(dest: str, revision: str) -> str:
    dest = os.path.normpath(dest)
    return os.path.join(os.path.dirname(dest), STASH, f"{os.path.basename(dest)}@{revision}")


def select_revision(dest: str, revision: str) -> str:
    """Make `dest` the folder of `revision`: "current" (it already is), "restored" (from the stash;
    the folder it replaced is stashed in turn) or "new" (nothing of it here: an empty folder)."""
    have = recorded_revision(dest)
    if have == revision:
        return "current"
    kept = stash_path(dest, revision)
    if have is not None:
        old = stash_path(dest, have)
        os.makedirs(os.path.dirname(old), exist_ok=True)
        if os.path.isdir(old):
            os.rename(old, old + f".replaced.{int(time.time())}")  # an older copy of the same commit
        os.rename(dest, old)
    if os.path.isdir(kept):
        if os.path.isdir(dest) and not os.listdir(dest):
            os.rmdir(dest)
        if not os.path.exists(dest):
            os.rename(kept, dest)
            return "restored"
    os.makedirs(dest, exist_ok=True)
    return "new"


def stashed(dest: str) -> list[str]:
    """Folders of other revisions of `dest`'s repo kept on this box."""
    root = os.path.dirname(stash_path(dest, "x"))
    prefix = os.path.basename(os.path.normpath(dest)) + "@"
    if not os.path.isdir(root):
        return []
    return sorted(os.path.join(root, n) for n in os.listdir(root) if n.startswith(prefix))


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
        checkpoints = self.meta(n).get("spec", {}).get("checkpoints", [])
        for ck in checkpoints:  # refuse before anything moves when a needed revision is gone
            if recorded_revision(ck["dest"]) != ck["revision"]:
                if not os.path.isdir(stash_path(ck["dest"], ck["revision"])):
                    raise ReleaseError(f"release {n} needs {ck['dest']} at {ck['revision']}, which is not on "
                                       "this box (pruned, or never fetched here): run deploy.py with that "
                                       "revision pinned to fetch it")
        for ck in checkpoints:
            if select_revision(ck["dest"], ck["revision"]) == "restored":
                print(f"{ck['dest']}: revision {ck['revision'][:12]} restored from {STASH}")
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
