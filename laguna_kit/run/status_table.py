"""The fleet's status as one table at the end of `tasks/status.py`: a row per box and replica
(release, mode, health, the router's view, last gate, the release's recorded tok/s, the hottest
GPU, free disk), from what each host's report read; the per-host lines stay above it."""

from __future__ import annotations

import atexit
import sys

from ..domain import fleet

ROWS: dict[tuple[str, int], dict] = {}  # (host, replica) -> its row's values
ROUTER: dict[str, str] = {}  # HAProxy server name -> its state (UP, DRAIN, DOWN ...)
COLUMNS = (
    ("host", "host"),
    ("replica", "replica"),
    ("release", "release"),
    ("mode", "mode"),
    ("health", "health"),
    ("router", "router"),
    ("last gate", "gate"),
    ("tok/s (recipe)", "tok_s"),
    ("GPU max °C", "gpu_c"),
    ("free at model_dir", "free"),
)


def hottest(gpu_query: str) -> str:
    """The highest temperature of `used, total, temperature;...` rows (nvidia-smi), "-" unread."""
    temps = []
    for row in (gpu_query or "").split(";"):
        cols = [c.strip() for c in row.split(",")]
        if len(cols) == 3 and cols[2].isdigit():
            temps.append(int(cols[2]))
    return str(max(temps)) if temps else "-"


def row(host: str, replica: int, status: dict, releases: dict, recipe: dict, free_mib) -> dict:
    cur, gate, perf = (
        releases.get("current") or {},
        releases.get("gate") or {},
        releases.get("perf"),
    )
    spec = cur.get("spec") or {}
    passed = gate.get("passed") and gate.get("release") == cur.get("number")
    tok = (perf or {}).get("decode_tok_s")
    return {
        "host": host,
        "replica": str(replica),
        "release": str(cur.get("number", "-")),
        "mode": spec.get("mode", "-"),
        "health": status.get("health") or "no answer",
        "server": fleet.server_name(host, replica),
        "drained": bool(releases.get("drain")),
        "gate": (f"passed {gate.get('time', '')}" if passed else "FAILED" if gate else "none"),
        "tok_s": f"{tok:.1f} ({recipe.get('decode_tok_s', '-')})"
        if isinstance(tok, int | float)
        else "-",
        "gpu_c": hottest(status.get("gpu_mem", "")),
        "free": f"{free_mib // 1024} GiB" if isinstance(free_mib, int) else "-",
    }


def lines(rows: dict[tuple[str, int], dict], router: dict[str, str]) -> list[str]:
    """The table: the router's state of each server when the router was in the run, else the
    box's own word (DRAIN when drained)."""
    table = []
    for key in sorted(rows):
        r = dict(rows[key])
        r["router"] = router.get(r["server"]) or ("DRAIN (box)" if r["drained"] else "-")
        table.append([str(r[field]) for _, field in COLUMNS])
    head = [title for title, _ in COLUMNS]
    widths = [max(len(x) for x in col) for col in zip(head, *table, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return ["--> Fleet status:", fmt.format(*head), *(fmt.format(*t) for t in table)]


def report() -> None:
    if ROWS:
        print("\n".join(lines(ROWS, ROUTER)), file=sys.stderr)


def register() -> None:
    """Once per run (tasks/status.py runs for every host)."""
    if not getattr(register, "done", False):
        register.done = True  # type: ignore[attr-defined]
        atexit.register(report)
