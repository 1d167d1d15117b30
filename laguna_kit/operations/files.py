"""Files the kit shares with others on the box: merged into, never replaced."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex

from pyinfra import host
from pyinfra.api import FileUploadCommand, OperationError, StringCommand, operation
from pyinfra.api.util import get_template
from pyinfra.facts.files import FileContents
from pyinfra.operations import files as pyinfra_files

from .. import KIT_ROOT
from ..boxtools import jsonfile
from ..facts.files import FileHashes
from ..run import memo


def deep_merge(base: dict, wanted: dict) -> dict:
    """`wanted` laid over `base`: nested dicts merge, anything else is replaced."""
    out = dict(base)
    for key, value in wanted.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def kit_file(src: str, **template_vars) -> bytes:
    """A file of the kit (`files/...`) as it lands on the box: rendered when it is a Jinja template
    (strict, as pyinfra's files.template), else as it is. For files_synced."""
    path = KIT_ROOT / src
    if src.endswith(".j2"):
        return get_template(str(path)).render(template_vars).encode()
    return path.read_bytes()


def json_on_box(path: str) -> dict | None:
    """The JSON object in the file at `path` on the box, read as the box tools read their own
    (boxtools/jsonfile.py): None when it is missing or empty; anything but an object is refused,
    never overwritten (the kit merges into files others wrote)."""
    lines = memo.fact(host, FileContents, path=path)
    try:
        return jsonfile.parse(None if lines is None else "\n".join(lines), f"{path} on {host.name}")
    except jsonfile.JsonFileError as exc:
        raise OperationError(
            f"{exc}; fix or remove it, the kit merges into it and will not overwrite it"
        ) from None


@operation()
def json_merged(path: str, wanted: dict, mode: str = "644"):
    """
    Merge `wanted` into the JSON object at `path`, keeping every key others wrote there.

    + path: the JSON file (created when missing; invalid JSON is refused, never overwritten)
    + wanted: keys to lay over it (nested objects merge)
    + mode: the file's mode when written

    **Example:**

    .. code:: python

        json_merged(name="daemon.json", path="/etc/docker/daemon.json",
                    wanted={"log-driver": "journald"})
    """
    current = json_on_box(path)
    merged = deep_merge(current or {}, wanted)
    if current is not None and merged == current:
        host.noop(f"{path} already holds {sorted(wanted)}")
        return
    yield from pyinfra_files.put._inner(
        src=io.StringIO(json.dumps(merged, indent=4) + "\n"), dest=path, mode=mode
    )


def private(mode: str) -> bool:
    """A file not for every user's eyes (no read bit for others: "600", "640:prometheus"):
    written from stdin with its final mode and group, never uploaded."""
    return not int(mode.partition(":")[0][-1], 8) & 4


@operation()
def files_synced(
    files: list[tuple[bytes, str, str]],
    fetched: list[tuple[str | tuple[str, ...], str, str]] | tuple = (),
    validate: dict[str, str] | None = None,
    removed: list[str] | tuple = (),
):
    """
    Many small files put on the box in one operation, judged by one command (sha256 and mode of
    all of them): a converged box costs one remote command, not two or three per file. Only files
    whose content or mode differ are written (atomically: to a temporary name, then renamed).

    + files: (content, destination, mode) of each file; a mode may name the file's group
      ("640:prometheus", else root's); a file others may not read goes on a command's stdin,
      never by upload
    + fetched: (URL or candidate URLs, destination, mode) of files the box downloads itself when
      they are missing
      (signing keys), before the files above; like ``files.download`` without a hash, an existing
      one is kept; an armored key fetched for a ``.gpg`` keyring is stored dearmored
    + validate: destination -> a command that must pass on the new file (``%s``: its temporary
      name) before it replaces the old one (as Ansible's ``validate``); files are written in the
      order given, so a file the checked one names can come first
    + removed: files of the kit's that must not be there (an earlier layout's), judged by the
      same command and removed after the new ones are in place

    **Example:**

    .. code:: python

        files_synced(name="Box tools", files=[(b"print(1)", "/opt/laguna-kit/bin/x.py", "755")])
    """
    seen = host.get_fact(
        FileHashes,
        paths=[dest for _, dest, _ in fetched] + [dest for _, dest, _ in files] + list(removed),
    )
    commands = list(writes(seen, files, fetched, validate, removed))
    if not commands:
        host.noop(f"{len(files) + len(fetched)} files up to date")
        return
    yield from commands


def stale(seen: dict, files: list[tuple[bytes, str, str]]) -> list[tuple[bytes, str, str]]:
    """The files whose content or mode on the box (`seen`: FileHashes) is not the wanted one."""
    return [
        (data, dest, mode)
        for data, dest, mode in files
        if {k: (seen.get(dest) or {}).get(k) for k in ("sha256", "mode")}
        != {"sha256": hashlib.sha256(data).hexdigest(), "mode": mode}
    ]


def writes(
    seen: dict,
    files: list[tuple[bytes, str, str]],
    fetched: list[tuple[str | tuple[str, ...], str, str]] | tuple = (),
    validate: dict[str, str] | None = None,
    removed: list[str] | tuple = (),
):
    """The commands that make the box's files (`seen`: their sha256 and mode as FileHashes reads
    them) what files_synced's arguments say; nothing when they are."""
    gone = sorted(path for path in removed if path in seen)
    missing = [(url, dest, mode) for url, dest, mode in fetched if dest not in seen]
    remode = [
        (dest, mode) for _, dest, mode in fetched if dest in seen and seen[dest]["mode"] != mode
    ]
    changed = stale(seen, files)
    if not (missing or remode or changed or gone):
        return
    dirs = sorted({os.path.dirname(dest) for _, dest, _ in [*missing, *changed]})
    if dirs:
        yield "install -d -m 755 " + shlex.join(dirs)
    for url, dest, mode in missing:
        yield fetch_command(url, dest, mode)
    for dest, mode in remode:
        yield f"chmod {shlex.quote(mode)} {shlex.quote(dest)}"
    for data, dest, mode in changed:
        yield from write_commands(data, dest, mode, (validate or {}).get(dest))
    if gone:
        yield "rm -f " + shlex.join(gone)


def fetch_command(url: str | tuple[str, ...], dest: str, mode: str) -> str:
    """The box downloads `url` to `dest` itself (a signing key): an armored key fetched for a
    `.gpg` keyring is stored dearmored (apt reads an armored key only from a `.asc` file). Several
    URLs (candidates, for a `.gpg` keyring): every one that answers is kept, one keyring."""
    if not isinstance(url, str):
        return _fetch_any(url, dest, mode)
    q_tmp, q_dest = shlex.quote(f"{dest}.laguna-new"), shlex.quote(dest)
    dearmor = f" && {dearmored(q_tmp)}" if dest.endswith(".gpg") else ""
    return (
        f"curl -fsSL --retry 3 -o {q_tmp} {shlex.quote(url)}{dearmor} && "
        f"chmod {shlex.quote(mode)} {q_tmp} && mv -f {q_tmp} {q_dest}"
    )


def dearmored(path: str) -> str:
    """Shell that turns the key at `path` (a quoted word) into a binary one, in place, when it is
    armored (apt reads an armored key only from a `.asc` file)."""
    return (
        f"if grep -q -- '-----BEGIN PGP' {path}; then gpg --batch --yes --dearmor "
        f"-o {path}.bin {path} && mv -f {path}.bin {path}; fi"
    )


def _fetch_any(urls: tuple[str, ...], dest: str, mode: str) -> str:
    """Each candidate key fetched (a 404 skipped), dearmored, and the ones found joined into one
    binary keyring (apt trusts any key in a Signed-By keyring); none found fails, naming them."""
    if not dest.endswith(".gpg"):
        raise ValueError(f"candidate URLs need a binary .gpg keyring, not {dest}")
    tmp = f"{dest}.laguna-new"
    parts = [f"{tmp}.{i}" for i in range(len(urls))]
    fetch = "; ".join(
        f"curl -fsSL --retry 3 -o {shlex.quote(p)} {shlex.quote(u)} || rm -f {shlex.quote(p)}"
        for p, u in zip(parts, urls, strict=True)
    )
    each = dearmored('"$f"')
    join = (
        f'for f in {shlex.join(parts)}; do [ -s "$f" ] || continue; {each}; '
        f'cat "$f" >> {shlex.quote(tmp)}; rm -f "$f"; done'
    )
    none = shlex.quote(f"none of {', '.join(urls)} could be fetched")
    q_tmp, q_dest = shlex.quote(tmp), shlex.quote(dest)
    return (
        f"rm -f {q_tmp}; {fetch}; {join}; [ -s {q_tmp} ] || {{ echo {none} >&2; exit 1; }}; "
        f"chmod {shlex.quote(mode)} {q_tmp} && mv -f {q_tmp} {q_dest}"
    )


def write_commands(data: bytes, dest: str, mode: str, check: str | None):
    """`data` to `dest` atomically (a temporary name, then renamed), checked by `check` (`%s`: the
    temporary name) before it replaces the old file."""
    tmp = f"{dest}.laguna-new"
    q_tmp = shlex.quote(tmp)
    perm, _, group = mode.partition(":")
    if private(mode):
        # Never an upload (pyinfra's go through /tmp as the login user under sudo): on the
        # stdin of the command that writes it, readable by root alone from its first byte, then
        # by its group once it has it.
        yield StringCommand(f"umask 077 && cat > {q_tmp}", _stdin=data.decode())
    else:
        yield FileUploadCommand(io.BytesIO(data), tmp)
    if check:
        yield check.replace("%s", q_tmp)
    group_it = f"chgrp {shlex.quote(group)} {q_tmp} && " if group else ""
    yield f"{group_it}chmod {shlex.quote(perm)} {q_tmp} && mv -f {q_tmp} {shlex.quote(dest)}"
