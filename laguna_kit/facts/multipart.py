"""One parser for facts whose command prints several parts, each after a marker line."""

from __future__ import annotations

import json


def split(output: list[str], markers: list[str]) -> dict[str, list[str]]:
    """{marker: the lines after it, up to the next marker}; lines before the first are dropped."""
    parts: dict[str, list[str]] = {m: [] for m in markers}
    key = None
    for line in output:
        if line in parts:
            key = line
        elif key:
            parts[key].append(line)
    return parts


def load_json(lines: list[str], default=None):
    """A part parsed as JSON; `default` (or {}) when it is empty or not JSON (a file being
    written)."""
    try:
        return (
            json.loads("\n".join(lines))
            if "".join(lines).strip()
            else ({} if default is None else default)
        )
    except ValueError:
        return {} if default is None else default
