"""The kit's one way to read a JSON record (box side and control side alike): the JSON *object*
in a file or a text, None when there is none (a missing or empty file), JsonFileError (a
ValueError) when there is text that is not a JSON object. A reader that may meet a file being
written (a progress record, a gate result) catches it where it reads, and says so there."""

from __future__ import annotations

import json
import os


class JsonFileError(ValueError):
    pass


def parse(text: str | None, where: str = "the text") -> dict | None:
    """The object `text` holds; None for no text."""
    if text is None or not text.strip():
        return None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise JsonFileError(f"{where} is not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise JsonFileError(f"{where} holds JSON that is not an object")
    return doc


def read(path: str) -> dict | None:
    """The object in the file at `path`; None when it is missing or empty."""
    try:
        with open(path) as fh:
            text = fh.read()
    except FileNotFoundError:
        return None
    return parse(text, path)


def read_or_none(path: str) -> dict | None:
    """read(), and None for a file that cannot be read or parsed now either: for records a
    reader never trusts half-written (another process replaces them atomically)."""
    try:
        return read(path)
    except (OSError, ValueError):
        return None


def write(path: str, doc: dict, indent: int | None = 1) -> None:
    """Replace the file atomically (a reader sees the old record or the new, never half)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=indent)
    os.replace(tmp, path)
