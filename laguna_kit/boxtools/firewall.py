"""laguna-firewall: the kit's nftables table, loaded atomically, with a self-revert that restores
the table loaded before (never an empty one) unless a confirmation comes in time.

    laguna_firewall.py load RULES [--revert-after S --fallback SAFE]
                                  check RULES, arm the revert (when asked), load RULES
    laguna_firewall.py confirm RULES
                                  disarm the revert; record what is loaded
    laguna_firewall.py state RULES
                                  JSON: {"table": "loaded" | "missing" | "altered" | "unrecorded"}
    laguna_firewall.py watch RULES [--every S] [--stop UNIT ...]
                                  keep the table loaded between deploys: every S seconds, a table
                                  that is gone (`nft flush ruleset`) or was changed by hand is
                                  loaded again from RULES; if it cannot be, UNITs stop serving;
                                  a fleet host a deploy could not find (its set empty, a
                                  "# rejoin" line naming it) is let in again once this box's own
                                  tailnet status shows it (boxtools/rejoin.py)

The revert is armed only for rules that can cut SSH (ssh_tailnet_only). It loads the previous
table (or SAFE, the same rules without the SSH limit, when there was none) and writes it over RULES,
so the next boot loads what the operator could come back through.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import time

from .rejoin import wanted, written

TABLE = ("inet", "laguna_kit")
# Each arming is a new `<name>:<ns>` timer: systemd refuses a transient unit whose name it still
# holds (see laguna_kit/domain/box_commands.py); the bare name is the one earlier kits used.
REVERT_UNIT = "laguna-firewall-revert"
REJOIN_EVERY_S = 10.0  # how often a set left empty by a deploy looks for its host
REVERT_UNITS = [f"{REVERT_UNIT}{run}.{kind}" for run in (":*", "") for kind in ("timer", "service")]


class FirewallError(Exception):
    pass


def nft(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["nft", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise FirewallError(f"nft {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def live_table() -> str | None:
    """The loaded table as nft lists it (stateless: no counter values), None when it is missing."""
    proc = nft("-s", "list", "table", *TABLE, check=False)
    return proc.stdout if proc.returncode == 0 else None


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def replacing(listing: str) -> str:
    """A file that replaces the kit's table with `listing` in one transaction."""
    family, name = TABLE
    return f"table {family} {name}\ndelete table {family} {name}\n{listing}"


def sources(rules: str) -> str:
    """The rules file and every file its `include "..."` lines name (globs sorted, as nft reads
    them): what a load puts in the table, so a changed include counts as a change."""
    with open(rules) as fh:
        text = fh.read()
    parts = [text]
    for line in text.splitlines():
        m = re.match(r'\s*include\s+"([^"]+)"', line)
        for path in sorted(glob.glob(m.group(1))) if m else ():
            with open(path) as fh:
                parts.append(f"\n# {path}\n{fh.read()}")
    return "".join(parts)


def write(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def load(rules: str, revert_after: int | None, fallback: str | None) -> None:
    nft("-c", "-f", rules)
    if revert_after:
        previous = live_table()
        if previous is not None:
            text = replacing(previous)
        elif fallback:
            with open(fallback) as fh:
                text = fh.read()
        else:
            raise FirewallError("a revert needs the previous table or a fallback rules file")
        saved = f"{rules}.previous"
        write(saved, text)
        disarm()
        restore = f"/usr/sbin/nft -f {saved} && cp {saved} {rules} && rm -f {rules}.loaded"
        subprocess.run(
            [
                "systemd-run",
                "--quiet",
                "--collect",
                "--unit",
                f"{REVERT_UNIT}:{time.time_ns()}",
                f"--on-active={int(revert_after)}",
                # a timer may otherwise fire up to a minute late (systemd's default accuracy)
                "--timer-property=AccuracySec=1s",
                "/bin/sh",
                "-c",
                restore,
            ],
            check=True,
            capture_output=True,
        )
    nft("-f", rules)


def disarm() -> None:
    """Stop every armed revert (its timer; its service, should it be running)."""
    subprocess.run(["systemctl", "stop", *REVERT_UNITS], capture_output=True)


def confirm(rules: str) -> None:
    disarm()
    table = live_table()
    if table is None:
        raise FirewallError("the kit's table is not loaded: nothing to confirm")
    record = {"rules_sha256": sha256(sources(rules)), "table_sha256": sha256(table)}
    write(f"{rules}.loaded", json.dumps(record) + "\n")


def state(rules: str) -> dict:
    table = live_table()
    if table is None:
        return {"table": "missing"}
    try:
        with open(f"{rules}.loaded") as fh:
            record = json.load(fh)
        rules_hash = sha256(sources(rules))
    except (OSError, ValueError):
        return {"table": "unrecorded"}
    if record.get("table_sha256") != sha256(table) or record.get("rules_sha256") != rules_hash:
        return {"table": "altered"}
    return {"table": "loaded"}


def restore(rules: str, stop: list[str]) -> str | None:
    """One look: what was done (None: nothing to do). A missing table is loaded again whatever
    the record says; a table that differs from the one confirmed is loaded again while the rules
    are the confirmed ones (otherwise a deploy or a self-revert is under way: theirs to finish)."""
    st = state(rules)
    if st["table"] == "loaded" or (st["table"] == "unrecorded" and live_table() is not None):
        return None
    if not os.path.exists(rules):
        return None  # nothing of the kit's to load
    if st["table"] == "altered":
        try:
            with open(f"{rules}.loaded") as fh:
                record = json.load(fh)
            if record.get("rules_sha256") != sha256(sources(rules)):
                return None  # new rules not confirmed yet: the deploy's (or the revert's) to finish
        except (OSError, ValueError):
            return None
    why = "gone (nft flush ruleset?)" if st["table"] == "missing" else "changed by hand"
    proc = nft("-f", rules, check=False)
    if proc.returncode == 0 and state(rules)["table"] == "loaded":
        return f"the kit's table was {why}: loaded again from {rules}"
    for unit in stop:
        subprocess.run(["systemctl", "stop", unit], capture_output=True)
    return (
        f"the kit's table was {why} and could not be loaded again ({proc.stderr.strip()}): "
        f"stopped {', '.join(stop) or 'nothing'} rather than serve without it"
    )


def watch(rules: str, every: float, stop: list[str]) -> None:
    looked = 0.0
    while True:
        try:
            said = restore(rules, stop)
            if not said and time.monotonic() - looked >= REJOIN_EVERY_S:
                looked = time.monotonic()
                said = rejoined(rules)
        except (FirewallError, OSError, ValueError) as exc:
            said = f"cannot judge the table: {exc}"
        if said:
            print(f"laguna-firewall: {said}", file=sys.stderr, flush=True)
        time.sleep(every)


def rejoined(rules: str) -> str | None:
    """A fleet host the last deploy could not find, back on this box's tailnet: its addresses
    written into its set's file, the rules loaded and confirmed (None: nothing to do)."""
    waiting = wanted(glob.glob(os.path.join(os.path.dirname(rules), "firewall.d", "*.nft")))
    if not waiting or state(rules)["table"] != "loaded":
        return None  # nothing waits, or a deploy or a revert is under way: theirs to finish
    status = tailscale_status()
    said = []
    for path, text in written(waiting, status).items():
        previous = open(path).read()
        write(path, text)
        if nft("-c", "-f", rules, check=False).returncode != 0:
            write(path, previous)
            continue
        nft("-f", rules)
        confirm(rules)
        said.append(f"{path}: {text.splitlines()[0].split(': ', 1)[-1]} is back, let in again")
    return "; ".join(said) or None


def tailscale_status() -> dict:
    proc = subprocess.run(
        ["tailscale", "status", "--json"], capture_output=True, text=True, timeout=20
    )
    return json.loads(proc.stdout) if proc.returncode == 0 else {}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    ld = sub.add_parser("load")
    ld.add_argument("rules")
    ld.add_argument("--revert-after", type=int)
    ld.add_argument("--fallback")
    sub.add_parser("confirm").add_argument("rules")
    sub.add_parser("state").add_argument("rules")
    wa = sub.add_parser("watch")
    wa.add_argument("rules")
    wa.add_argument("--every", type=float, default=2.0)
    wa.add_argument("--stop", action="append", default=[])
    args = p.parse_args(argv)
    try:
        if args.cmd == "load":
            load(args.rules, args.revert_after, args.fallback)
        elif args.cmd == "confirm":
            confirm(args.rules)
        elif args.cmd == "watch":
            watch(args.rules, args.every, args.stop)
        else:
            print(json.dumps(state(args.rules)))
    except (FirewallError, OSError, subprocess.CalledProcessError) as exc:
        print(f"laguna-firewall: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
