"""The one way a secret reaches the box: a 0600 file in a 0700 folder, removed when its command
ends."""

from __future__ import annotations

import io
import os
import shlex

from pyinfra.api import FileUploadCommand


def with_secret(value: str, path: str, command: str):
    """Yield the commands that run `command` with `value` in the file `path`, removed whatever the
    command's exit status (which is kept). Without a value, `command` runs alone."""
    if not value:
        yield command
        return
    q = shlex.quote(path)
    yield f"install -d -m 700 {shlex.quote(os.path.dirname(path))}"
    yield FileUploadCommand(io.StringIO(value), path)
    yield f"chmod 600 {q}"
    yield f"{command}; rc=$?; rm -f {q}; exit $rc"
