"""The releases of one serving unit on the box, as files: their folders (release.json, the unit,
perf.json), state.json (current, previous, history, failed), and this replica's router agent
settings and drain marker. The only reader and writer of that layout."""

from __future__ import annotations

import json
import os

from .. import jsonfile
from ..layout import REPLICAS, ROUTER_AGENT, ROUTER_DRAIN, gate_result, releases_dir


class Store:
    def __init__(self, kit_dir: str, unit: str, state_dir: str | None = None):
        self.kit_dir = kit_dir  # the box tools and their venv
        # this replica's releases, last gate, router agent settings and drain marker (replica 1:
        # kit_dir itself; laguna_kit/domain/replicas.py)
        self.state_dir = state_dir or kit_dir
        self.root = releases_dir(self.state_dir)
        self.unit = unit
        self.state_path = os.path.join(self.root, "state.json")

    # --- state.json ---------------------------------------------------------------------------
    def state(self) -> dict:
        return jsonfile.read_or_none(self.state_path) or {
            "current": None,
            "previous": None,
            "history": [],
        }

    def save(self, state: dict) -> None:
        jsonfile.write(self.state_path, state)

    def current(self) -> int | None:
        return self.state().get("current")

    def mark_failed(self, n: int | None) -> None:
        if n is None:
            return
        state = self.state()
        state["failed"] = sorted(set(state.get("failed", [])) | {n})
        state["previous"] = previous_of(state)
        self.save(state)

    def mark_passed(self, n: int | None) -> None:
        state = self.state()
        if n in state.get("failed", []):
            state["failed"] = [f for f in state["failed"] if f != n]
            self.save(state)

    # --- the release folders ------------------------------------------------------------------
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
        n = self.current()
        try:
            return self.meta(n) if n is not None else {}
        except (OSError, ValueError):
            return {}

    def release_unit(self, n: int) -> str:
        with open(os.path.join(self.folder(n), self.unit)) as fh:
            return fh.read()

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
                path = os.path.join(root, n, "release.json")
                meta = jsonfile.read_or_none(path) if n.isdigit() else None
                if meta:
                    specs.append(meta.get("spec") or {})
        return specs

    # --- the performance record: a release's figures from its first passing gate (perf.json) --
    def perf(self, n: int | None) -> dict | None:
        if n is None:
            return None
        return jsonfile.read_or_none(os.path.join(self.folder(n), "perf.json"))

    def gate_result(self) -> dict:
        return jsonfile.read_or_none(gate_result(self.state_dir)) or {}

    def record_perf(self) -> None:
        """After a passing gate: the release's figures, kept with it (the first pass only)."""
        result = self.gate_result()
        n = result.get("release")
        if result.get("passed") and n in self.numbers() and self.perf(n) is None:
            rec = dict(result.get("perf") or {}, release=n, time=result.get("time"))
            with open(os.path.join(self.folder(n), "perf.json"), "w") as fh:
                json.dump(rec, fh, indent=1)

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

    # --- the fleet router's view of this replica (its agent answers from the drain marker) ----
    def agent(self) -> dict | None:
        return jsonfile.read_or_none(os.path.join(self.state_dir, ROUTER_AGENT))

    def drained(self) -> dict | None:
        return jsonfile.read_or_none(os.path.join(self.state_dir, ROUTER_DRAIN))

    def drain_marker(self) -> str:
        return os.path.join(self.state_dir, ROUTER_DRAIN)

    def listing(self) -> list[str]:
        current = self.current()
        lines = []
        for n in self.numbers():
            m = self.meta(n)
            lines.append(
                f"{'*' if n == current else ' '} {n:4d}  {m.get('created')}  {m.get('mode'):14s} "
                f"{m.get('image')}  target {str(m.get('target_revision'))[:12]}  "
                f"drafter {str(m.get('drafter_revision'))[:12]}"
            )
        return lines


def previous_of(state: dict) -> int | None:
    """The release that ran before the current one and did not fail its gate (never a toggle
    back to a failed release)."""
    failed = set(state.get("failed", []))
    for entry in reversed(state.get("history", [])):
        n = entry.get("release")
        if n != state.get("current") and n not in failed:
            return n
    return None
