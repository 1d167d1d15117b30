"""The one way a secret reaches the box: on the standard input of the command that writes it into
a 0700 folder on /run (a tmpfs: never on disk, gone at reboot), removed when its command ends.

Never an upload: with sudo, pyinfra's uploads go by SFTP as the login user to a predictable name in
/tmp with the sftp-server's default mode, then are copied as root (pyinfra 3.10 connectors/ssh.py
put_file), so a secret would be world-readable there for a moment, and stay if the copy failed.
"""

from __future__ import annotations

import shlex

from pyinfra.api import StringCommand

from ..boxtools.layout import SECRETS_DIR


def secret_path(name: str) -> str:
    return f"{SECRETS_DIR}/{name}"


def with_secret(value: str, path: str, command: str):
    """Yield the commands that run `command` with `value` in the file `path` (under SECRETS_DIR),
    removed whatever the command's exit status (which is kept). Without a value, `command` runs
    alone."""
    if not value:
        yield command
        return
    q, folder = shlex.quote(path), shlex.quote(path.rsplit("/", 1)[0])
    yield StringCommand(f"umask 077 && install -d -m 700 {folder} && cat > {q}", _stdin=value)
    yield f"{command}; rc=$?; rm -f {q}; exit $rc"
