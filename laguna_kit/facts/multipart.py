"""One parser for facts whose command prints several parts, each after a marker line."""

from __future__ import annotations

from ..boxtools import jsonfile


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


def load_json(lines: list[str]) -> dict:
    """A part holding a JSON object (boxtools/jsonfile.py's contract), {} when there is none, or
    when it is no object yet (a record being written is read again next time)."""
    try:
        return jsonfile.parse("\n".join(lines)) or {}
    except jsonfile.JsonFileError:
        return {}
