"""How the gate fails and says what it does: one exception, one log line format (stderr)."""

from __future__ import annotations

import sys
import time


class GateFailure(Exception):
    pass


def log(msg: str) -> None:
    print(f"[gate {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
