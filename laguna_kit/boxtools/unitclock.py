"""When systemd says a unit entered active, read as seconds since the epoch: `systemctl show
--timestamp=us+utc` ("Mon 2026-12-07 10:32:31.123456 UTC", systemd 247 and later: every
distribution the kit supports; `--timestamp=unix` came only in 251, after Ubuntu 22.04's 249).
Shared by the box tools and the control side's facts."""

from __future__ import annotations

from datetime import datetime, timezone

SHOW_ARGS = ("--timestamp=us+utc",)


def since_epoch(stamp: str) -> float | None:
    """Seconds since the epoch; seconds only where systemd prints no more; None when unset
    ("n/a", "") or not in UTC."""
    parts = stamp.split()
    if len(parts) != 4 or parts[3] != "UTC":
        return None
    clock = parts[2] if "." in parts[2] else parts[2] + ".0"
    try:
        when = datetime.strptime(f"{parts[1]} {clock}", "%Y-%m-%d %H:%M:%S.%f")
    except ValueError:
        return None
    return when.replace(tzinfo=timezone.utc).timestamp()
