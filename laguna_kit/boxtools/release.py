"""laguna-release: numbered releases of the serving unit on this box, and switching between them.

    laguna_release.py list                releases, the current one marked
    laguna_release.py state --json        state, current release, last gate, unit (the deploy's)
    laguna_release.py install-incoming    number the release the deploy uploaded, activate it
    laguna_release.py activate N          run release N
    laguna_release.py rollback [--to N]   run the previous release (or N)
    laguna_release.py rollback --like N   (a replica past the first) run this replica's release
                                          that runs what replica 1's release N runs
    laguna_release.py validate [--auto-rollback] [--force-slower]
                                          run the gate on the current release; on failure roll
                                          back, validate the restored release, and fail (a
                                          release decoding below min_decode_ratio x the previous
                                          one's fails, unless --force-slower)
    laguna_release.py stop                stop serving (the unit stays installed)
    laguna_release.py drain               the fleet router sends this box nothing new (an
                                          operator's drain: only `undrain` ends it)
    laguna_release.py undrain [--kit]     the router may send it requests again (--kit: only if
                                          the kit drained it)
    laguna_release.py prune --keep N      remove releases beyond the newest N (never the current
                                          one or the one a rollback would run), and the images and
                                          checkpoint revisions only they used

In a fleet with a router (router-agent.json present), every restart is drained first: the box's
agent answers "drain" (router-drain exists), the release manager waits for the router to ask twice
and for vLLM's running and waiting requests to reach 0, then restarts; a passed gate ends the kit's
drain. A failed gate leaves the box drained.

A release folder holds release.json (what ran: mode, image digest, revisions, flags, time), the
unit file, and perf.json (its figures from its first passing gate: decode tok/s, TTFT, DFlash
acceptance). This module is the only reader and writer of that layout; the deploy asks it
(`state --json`). Activating installs the unit, runs `systemctl daemon-reload` only when the unit
file really changed (a reload can detach GPUs from running containers), and restarts the service.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

from . import revisions
from .layout import (
    REPLICAS,
    ROUTER_AGENT,
    ROUTER_DRAIN,
    STASH,
    UNIT_DIR,
    gate_result,
    releases_dir,
)


class ReleaseError(Exception):
    pass


class Releases:
    def __init__(self, kit_dir: str, unit: str, state_dir: str | None = None):
        self.kit_dir = kit_dir  # the box tools and their venv
        # this replica's releases, last gate, router agent settings and drain marker (replica 1:
        # kit_dir itself; laguna_kit/replicas.py)
        self.state_dir = state_dir or kit_dir
        self.root = releases_dir(self.state_dir)
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

    def spec(self, n: int) -> dict:
        """release.json's spec of release n ({} when it is unreadable)."""
        try:
            return self.meta(n).get("spec") or {}
        except (OSError, ValueError):
            return {}

    def current_meta(self) -> dict:
        """release.json of the current release ({} when there is none or it is unreadable)."""
        n = self.state().get("current")
        try:
            return self.meta(n) if n is not None else {}
        except (OSError, ValueError):
            return {}

    # --- keeping the disk: releases beyond keep_releases, and what only they used ------------
    def prune_plan(self, keep: int) -> dict:
        """{"releases": numbers to remove, "revisions": stashed checkpoint folders only they used,
        "images": image digests only they ran}: the newest `keep` releases stay, and always the
        current one and the one a rollback would run; what a kept release names is never in it."""
        numbers = self.numbers()
        state = self.state()
        kept = set(numbers[-keep:] if keep > 0 else []) | {
            state.get("current"),
            self.previous_of(state) if state.get("current") is not None else None,
        }
        gone = [n for n in numbers if n not in kept]
        if not gone:
            return {"releases": [], "revisions": [], "images": []}
        # Replicas share the box's images and checkpoint revisions: what any release of another
        # replica names stays too.
        kept_specs = [self.spec(n) for n in numbers if n in kept] + self.sibling_specs()
        kept_revisions = {
            (c["dest"], c["revision"]) for sp in kept_specs for c in sp.get("checkpoints") or []
        }
        kept_digests = {sp.get("image_digest") for sp in kept_specs}
        revisions_gone, images_gone = set(), set()
        for n in gone:
            sp = self.spec(n)
            for c in sp.get("checkpoints") or []:
                if (c["dest"], c["revision"]) in kept_revisions:
                    continue
                folder = revisions.stash_path(c["dest"], c["revision"])
                if (
                    os.path.isdir(folder)
                    and revisions.recorded_revision(c["dest"]) != c["revision"]
                ):
                    revisions_gone.add(folder)
            digest = sp.get("image_digest")
            if digest and digest not in kept_digests and sp.get("image"):
                images_gone.add(f"{sp['image'].rsplit(':', 1)[0]}@{digest}")
        try:
            present = set(
                capture(
                    "docker", "image", "ls", "--digests", "--format", "{{.Repository}}@{{.Digest}}"
                ).split()
            )
        except OSError:  # no docker: no image to remove
            present = set()

        return {
            "releases": gone,
            "revisions": sorted(revisions_gone),
            "images": sorted(images_gone & present),
        }

    def sibling_specs(self) -> list[dict]:
        """The release specs of this box's other replicas (replica 1 under kit_dir, replica n
        under kit_dir/replicas/n)."""
        roots = [releases_dir(self.kit_dir)]
        extra = os.path.join(self.kit_dir, REPLICAS)
        if os.path.isdir(extra):
            roots += [releases_dir(os.path.join(extra, n)) for n in sorted(os.listdir(extra))]
        specs = []
        for root in roots:
            if os.path.realpath(root) == os.path.realpath(self.root) or not os.path.isdir(root):
                continue
            for n in os.listdir(root):
                meta = read_json(os.path.join(root, n, "release.json")) if n.isdigit() else None
                if meta:
                    specs.append(meta.get("spec") or {})
        return specs

    def prune(self, keep: int) -> dict:
        plan = self.prune_plan(keep)
        for folder in plan["revisions"]:
            shutil.rmtree(folder, ignore_errors=True)
        for ref in plan["images"]:  # never forced: an image a container still uses stays
            run("docker", "image", "rm", ref, check=False)
        for n in plan["releases"]:
            shutil.rmtree(self.folder(n), ignore_errors=True)
        state = self.state()
        state["failed"] = [n for n in state.get("failed", []) if n not in plan["releases"]]
        if "failed" in state:
            self.save(state)
        for what, items in plan.items():
            if items:
                print(f"pruned {what}: {', '.join(map(str, items))}")
        return plan

    def snapshot(self) -> dict:
        """What the deploy needs to judge this box: state, current release, last gate, unit."""
        try:
            with open(gate_result(self.state_dir)) as fh:
                gate = json.load(fh)
        except (OSError, ValueError):
            gate = {}
        props = dict(
            line.split("=", 1)
            for line in capture(
                "systemctl",
                "show",
                self.unit,
                "-p",
                "ActiveState",
                "-p",
                "ActiveEnterTimestamp",
                "--timestamp=unix",
            ).splitlines()
            if "=" in line
        )
        since = props.get("ActiveEnterTimestamp", "").lstrip("@")
        return {
            "drain": self.drained(),
            "state": self.state() if os.path.exists(self.state_path) else {},
            "current": self.current_meta(),
            "unit_drift": self.unit_drift(),
            "replica_units": self.replica_units(),
            "gate": gate,
            "perf": self.perf(self.state().get("current")),
            "unit": {
                "active": props.get("ActiveState") == "active",
                "since": int(since) if since.isdigit() else None,
            },
        }

    def replica_units(self) -> list[str]:
        """Installed units of this unit's further replicas (`<unit>-n.service`, n > 1): what a
        box with fewer cards, or a lower replicas_per_box, has to retire."""
        stem = self.unit.removesuffix(".service")
        try:
            names = os.listdir(UNIT_DIR)
        except OSError:
            return []
        pattern = re.compile(re.escape(stem) + r"-([2-9]|[1-9][0-9]+)\.service")
        return sorted((n for n in names if pattern.fullmatch(n)), key=lambda n: (len(n), n))

    # --- the fleet router's view of this box (laguna-router-agent.socket answers from the marker)
    def agent(self) -> dict | None:
        return read_json(os.path.join(self.state_dir, ROUTER_AGENT))

    def drained(self) -> dict | None:
        return read_json(os.path.join(self.state_dir, ROUTER_DRAIN))

    def drain(self, reason: str, by: str = "kit") -> None:
        """Ask the router for no new requests and wait until it has asked since and the running
        ones have ended (without a router in this box's fleet: nothing to do)."""
        agent = self.agent()
        if agent is None:
            return
        before = self.drained()
        if before is None or by == "operator":
            self.mark_drained(reason, by)
        if before is None:
            # Each agent check is one accepted connection: two after the marker, and the router
            # has seen "drain" (a check may have read the file just before it was written). The
            # socket answers for every replica of the box: two rounds of all their checks.
            interval = agent.get("check_interval_ms", 1000) / 1000
            need = 2 * int(agent.get("replicas") or 1)
            start, deadline = accepted(agent["socket"]), time.monotonic() + max(5, 4 * interval)
            while accepted(agent["socket"]) < start + need and time.monotonic() < deadline:
                time.sleep(0.1)
            if accepted(agent["socket"]) < start + need:
                say("the fleet router did not ask this box's agent (down?): not waiting for it")
        deadline = time.monotonic() + agent.get("drain_timeout_s", 300)
        busy = in_flight(agent["api_port"])
        while busy and time.monotonic() < deadline:
            time.sleep(0.2)
            busy = in_flight(agent["api_port"])
        if busy:
            say(f"{busy} request(s) still running after the drain timeout: restarting anyway")

    def mark_drained(self, reason: str, by: str = "kit") -> None:
        marker = {"by": by, "reason": reason, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        tmp = os.path.join(self.state_dir, ROUTER_DRAIN + ".tmp")
        with open(tmp, "w") as fh:
            json.dump(marker, fh)
        os.replace(tmp, os.path.join(self.state_dir, ROUTER_DRAIN))

    def undrain(self, by: str = "kit") -> None:
        """End the kit's drain (or with by="operator", any drain)."""
        marker = self.drained()
        if marker is None:
            return
        if marker.get("by") == "operator" and by != "operator":
            say(
                f"still drained at the fleet router by an operator ({marker.get('reason')}): "
                "`laguna_release.py undrain` ends it"
            )
            return
        try:
            os.remove(os.path.join(self.state_dir, ROUTER_DRAIN))
        except FileNotFoundError:
            pass

    def unit_drift(self) -> list[str]:
        """How the installed unit differs from the current release's (a hand edit): diff lines."""
        import difflib

        n = self.state().get("current")
        if n is None or n not in self.numbers():
            return []
        wanted, found = self.release_unit(n), self.installed_unit() or ""
        if wanted == found:
            return []
        diff = difflib.unified_diff(wanted.splitlines(), found.splitlines(), lineterm="", n=0)
        return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")][:12]

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

    def installed_unit(self) -> str | None:
        try:
            with open(os.path.join(UNIT_DIR, self.unit)) as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def release_unit(self, n: int) -> str:
        with open(os.path.join(self.folder(n), self.unit)) as fh:
            return fh.read()

    def install_unit(self, text: str | None) -> None:
        """Put `text` (None: no unit) where systemd reads it; daemon-reload only on a real change
        (a reload can detach GPUs from running containers)."""
        if text == self.installed_unit():
            return
        dest = os.path.join(UNIT_DIR, self.unit)
        if text is None:
            os.unlink(dest)
        else:
            tmp = dest + ".laguna-tmp"
            with open(tmp, "w") as fh:
                fh.write(text)
            os.replace(tmp, dest)
        run("systemctl", "daemon-reload")

    def select_checkpoints(self, n: int, check_only: bool = False) -> None:
        checkpoints = self.meta(n).get("spec", {}).get("checkpoints", [])
        for ck in checkpoints:  # refuse before anything moves when a needed revision is gone
            if not revisions.available(ck["dest"], ck["revision"]):
                raise ReleaseError(
                    f"release {n} needs {ck['dest']} at {ck['revision']}, which is not on "
                    "this box (pruned, or never fetched here): run deploy.py with that "
                    "revision pinned to fetch it"
                )
        if check_only:
            return
        for ck in checkpoints:
            if revisions.select_revision(ck["dest"], ck["revision"]) == "restored":
                print(f"{ck['dest']}: revision {ck['revision'][:12]} restored from {STASH}")

    def activate(self, n: int) -> None:
        """Run release `n`, as one transaction: if it does not start, the unit, the checkpoints
        and the service of the release that ran before are put back, and state.json still names
        it."""
        if n not in self.numbers():
            raise ReleaseError(f"no release {n}; have {self.numbers()}")
        self.select_checkpoints(n, check_only=True)
        self.drain(f"release {n} starting")
        before = self.state().get("current")
        old_unit = self.installed_unit()
        self.select_checkpoints(n)
        self.install_unit(self.release_unit(n))
        run("systemctl", "enable", "--quiet", self.unit)
        run("systemctl", "reset-failed", self.unit, check=False)
        try:
            self.restart(n)
        except ReleaseError as exc:
            if before is not None and before != n and before in self.numbers():
                self.select_checkpoints(before)
                self.install_unit(old_unit)
                run("systemctl", "reset-failed", self.unit, check=False)
                self.restart(before, check=False)
                raise ReleaseError(
                    f"release {n} did not start ({exc}); release {before} is back in place"
                ) from None
            raise
        state = self.state()
        state["current"] = n
        state.setdefault("history", []).append(
            {"release": n, "activated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        )
        state["previous"] = self.previous_of(state)
        self.save(state)
        print(f"release {n} active ({self.meta(n).get('mode')}, {self.meta(n).get('image')})")

    def container_of(self, n: int) -> str | None:
        """The container name release `n` runs (`--name` in its docker command line)."""
        try:
            argv = self.meta(n).get("spec", {}).get("argv") or []
        except (OSError, ValueError):
            return None
        return next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--name"), None)

    def restart(self, n: int, check: bool = True) -> None:
        """Stop the unit, let its container settle, start it. A `docker run` the stop killed
        before its container existed (a start seconds old: at boot, dockerd is slow) does not stop
        the daemon from creating that container a moment later, unowned: the new start's
        `docker rm -f` ran too early, its `docker run` then met "Conflict. The container name is
        already in use", and the gate passed against the orphan while the unit failed and came
        back 15 s later (seen after a power cut during a mode switch)."""
        run("systemctl", "stop", self.unit, check=check)
        name = self.container_of(n)
        if name:
            settle_container(name)
        run("systemctl", "start", self.unit, check=check)

    @staticmethod
    def previous_of(state: dict) -> int | None:
        """The release that ran before the current one and did not fail its gate (never a toggle
        back to a failed release)."""
        failed = set(state.get("failed", []))
        for entry in reversed(state.get("history", [])):
            n = entry.get("release")
            if n != state.get("current") and n not in failed:
                return n
        return None

    def rollback(self, to: int | None) -> int:
        """Activate release `to` (re-activating the current one restarts it), or the previous one
        that did not fail its gate."""
        state = self.state()
        if to is not None:
            self.activate(to)
            print(f"rolled back to release {to}")
            return to
        target = self.previous_of(state)
        if target is None:
            current, failed = state.get("current"), set(state.get("failed", []))
            older = [
                n
                for n in self.numbers()
                if n != current and n not in failed and (current is None or n < current)
            ]
            target = older[-1] if older else None
        if target is None:
            skipped = sorted(state.get("failed", []))
            raise ReleaseError(
                "no previous release to roll back to"
                + (
                    f" (releases that failed their gate are skipped: {skipped}; "
                    "name one with --to N)"
                    if skipped
                    else ""
                )
            )
        self.activate(target)
        print(f"rolled back to release {target}")
        return target

    def like(self, n: int) -> int | None:
        """`rollback_to` on a box with several replicas: this replica's newest release that runs
        what replica 1's release `n` runs (one that passed its gate before one that failed), and
        None when it has none (a replica the box gained later) or already runs it."""
        try:
            wanted = version_of(Releases(self.kit_dir, "").meta(n)["spec"])
        except (OSError, ValueError, KeyError):
            raise ReleaseError(f"replica 1 has no release {n} (see: laguna_release.py list)")
        state = self.state()
        failed = set(state.get("failed", []))
        matches = [m for m in self.numbers() if version_of(self.spec(m)) == wanted]
        if not matches:
            print(
                f"no release of {self.unit} runs what replica 1's release {n} runs: it stays on "
                f"release {state.get('current')}"
            )
            return None
        target = max(matches, key=lambda m: (m not in failed, m))
        if target == state.get("current"):
            print(f"{self.unit} runs release {target}, as replica 1's release {n}: left serving")
            return None
        self.activate(target)
        print(f"rolled back to release {target} (replica 1's release {n})")
        return target

    def mark_failed(self, n: int | None) -> None:
        if n is None:
            return
        state = self.state()
        state["failed"] = sorted(set(state.get("failed", [])) | {n})
        state["previous"] = self.previous_of(state)
        self.save(state)

    def mark_passed(self, n: int | None) -> None:
        state = self.state()
        if n in state.get("failed", []):
            state["failed"] = [f for f in state["failed"] if f != n]
            self.save(state)

    # --- the performance record: a release's figures from its first passing gate (perf.json)
    def perf(self, n: int | None) -> dict | None:
        return read_json(os.path.join(self.folder(n), "perf.json")) if n is not None else None

    def perf_baseline(self, n: int | None) -> dict | None:
        """What release n's decode is held to: the newest earlier release of the same mode on this
        box that passed its gate (its record). None once n has a record of its own (a re-gate after
        a restart measures the box, not the release) or when there is none to compare with."""
        if n is None or self.perf(n) is not None:
            return None
        mode = self.meta(n).get("mode")
        failed = set(self.state().get("failed", []))
        for m in sorted((m for m in self.numbers() if m < n and m not in failed), reverse=True):
            rec = self.perf(m)
            if rec and rec.get("mode") == mode and rec.get("decode_tok_s"):
                return {"release": m, "decode_tok_s": rec["decode_tok_s"], "mode": mode}
        return None

    def record_perf(self) -> None:
        """After a passing gate: the release's figures, kept with it (the first pass only)."""
        result = read_json(gate_result(self.state_dir)) or {}
        n = result.get("release")
        if result.get("passed") and n in self.numbers() and self.perf(n) is None:
            rec = dict(result.get("perf") or {}, release=n, time=result.get("time"))
            with open(os.path.join(self.folder(n), "perf.json"), "w") as fh:
                json.dump(rec, fh, indent=1)

    def gate(self, force_slower: bool = False) -> bool:
        """Run the gate (in the kit's venv) on whichever release is current; True when it passed."""
        cmd = [
            f"{self.kit_dir}/venv/bin/python",
            f"{self.kit_dir}/bin/laguna_gate.py",
            "--kit-dir",
            self.kit_dir,
            "--state-dir",
            self.state_dir,
            "--unit",
            self.unit,
            "--result",
            gate_result(self.state_dir),
        ] + (["--force-slower"] if force_slower else [])
        passed = subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode == 0
        if passed:
            self.record_perf()
        return passed

    def validate(self, auto_rollback: bool, force_slower: bool = False) -> bool:
        """The current release passes the gate, or it is marked failed and (auto_rollback) the
        previous good release is restored and validated; either way a failed gate is a failed
        validation. With nothing to roll back to, the failing release is stopped."""
        current = self.state().get("current")
        if self.gate(force_slower):
            self.mark_passed(current)
            self.undrain()
            return True
        self.mark_failed(current)
        if self.agent() is not None and (self.drained() or {}).get("by") != "operator":
            self.mark_drained(f"release {current} failed its gate")  # out of the rotation
        if not auto_rollback:
            return False
        say("the gate failed: rolling back to the previous release")
        try:
            self.rollback(None)
        except ReleaseError as exc:
            print(f"laguna-release: {exc}", file=sys.stderr)
            run("systemctl", "stop", self.unit, check=False)
            say(
                f"release {current} failed its gate and there is no release to roll back to: it is "
                f"stopped, not left serving (journalctl -u {self.unit}; TROUBLESHOOTING.md)"
            )
            return False
        if self.gate():
            self.undrain()
            say("the previous release serves and passed the gate")
        else:
            self.mark_failed(self.state().get("current"))
            say("the previous release FAILED the gate too: stop and diagnose (TROUBLESHOOTING.md)")
        return False


# A replica's own name, port and cards in the vLLM command line: what else it runs is its version.
OWN_FLAGS = ("--name", "--port")
OWN_ENV = "CUDA_VISIBLE_DEVICES="


def version_of(spec: dict) -> dict:
    """What a release runs, less what makes it one replica and not another (its container name,
    port and cards; the gate's URL): two replicas' releases with the same version run the same."""
    argv, out, skip = list(spec.get("argv") or []), [], False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a in OWN_FLAGS or (
            a == "-e" and argv[i + 1 : i + 2] and argv[i + 1].startswith(OWN_ENV)
        ):
            skip = True
            continue
        out.append(a)
    keys = ("mode", "image_digest", "target_revision", "drafter_revision", "checkpoints")
    return {"argv": out, **{k: spec.get(k) for k in keys}}


def say(msg: str) -> None:
    print(f"laguna: {msg}", file=sys.stderr, flush=True)


def capture(*cmd: str) -> str:
    return subprocess.run(cmd, capture_output=True, text=True).stdout


def read_json(path: str) -> dict | None:
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def accepted(socket_unit: str) -> int:
    """Connections the socket unit has accepted since it started."""
    value = capture("systemctl", "show", "-p", "NAccepted", "--value", socket_unit).strip()
    return int(value) if value.isdigit() else 0


def in_flight(api_port: int) -> int:
    """vLLM's running + waiting requests (its /metrics gauges); 0 when nothing answers."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{api_port}/metrics", timeout=5) as resp:
            text = resp.read().decode(errors="replace")
    except OSError:
        return 0
    total = 0.0
    for line in text.splitlines():
        if line.startswith(("vllm:num_requests_running", "vllm:num_requests_waiting")):
            try:
                total += float(line.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                pass
    return int(total)


def settle_container(name: str, quiet_s: float = 3.0, limit_s: float = 30.0) -> None:
    """No container `name` for `quiet_s` in a row (one a killed client still had the daemon create
    is removed as it appears), or `limit_s` passed."""
    deadline, quiet_since = time.monotonic() + limit_s, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < quiet_s:
        exists = (
            subprocess.run(["docker", "container", "inspect", name], capture_output=True).returncode
            == 0
        )
        if exists:
            run("docker", "rm", "-f", name, check=False)
            quiet_since = time.monotonic()
        time.sleep(0.25)


def run(*cmd: str, check: bool = True) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise ReleaseError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")


def listing(rel: Releases) -> list[str]:
    current = rel.state().get("current")
    lines = []
    for n in rel.numbers():
        m = rel.meta(n)
        lines.append(
            f"{'*' if n == current else ' '} {n:4d}  {m.get('created')}  {m.get('mode'):14s} "
            f"{m.get('image')}  target {str(m.get('target_revision'))[:12]}  "
            f"drafter {str(m.get('drafter_revision'))[:12]}"
        )
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    args = p.parse_args(argv)
    rel = Releases(args.kit_dir, args.unit, args.state_dir)
    try:
        if args.cmd == "list":
            print("\n".join(listing(rel)))
        elif args.cmd == "state":
            print(json.dumps(rel.snapshot()))
        elif args.cmd == "prune":
            rel.prune(args.keep)
        elif args.cmd == "install-incoming":
            rel.install_incoming()
        elif args.cmd == "activate":
            rel.activate(args.number)
        elif args.cmd == "rollback" and args.like is not None:
            rel.like(args.like)
        elif args.cmd == "rollback":
            rel.rollback(args.to)
        elif args.cmd == "validate":
            return 0 if rel.validate(args.auto_rollback, args.force_slower) else 1
        elif args.cmd == "stop":
            rel.drain("stopped")
            run("systemctl", "stop", args.unit)
        elif args.cmd == "drain":
            if rel.agent() is None:
                raise ReleaseError(f"no fleet router here (no {ROUTER_AGENT}): nothing to drain")
            rel.drain("drained by an operator", by="operator")
            print("drained: the fleet router sends this box nothing new; running requests ended")
        elif args.cmd == "undrain" and args.kit:
            rel.undrain()
        elif args.cmd == "undrain":
            rel.undrain(by="operator")
            print("undrained: the fleet router sends this box requests again (when /health passes)")
    except ReleaseError as exc:
        print(f"laguna-release: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
