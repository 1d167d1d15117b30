"""Checkpoints on the box: every file verified against the hub's own hash."""

from __future__ import annotations

import io
import json
import os
import shlex

from pyinfra import host
from pyinfra.api import FileUploadCommand, OperationError, operation

from .. import hub
from ..boxcli import tool_command, transient
from ..facts.checkpoints import CheckpointState
from .secrets import secret_path, with_secret


@operation()
def checkpoint_synced(
    ckpt,
    dest: str,
    endpoint: str,
    token_var: str,
    kit_dir: str,
    workers: int,
    margin_mib: int,
    rehash: bool = False,
    mirror: str = "",
):
    """
    The pinned checkpoint is in `dest`, every file verified against the hub's hash.

    Judged from stat and the box's verification record: a converged box is not hashed. Otherwise
    the box's laguna_fetch.py runs (resume, hash, quarantine, one re-fetch). The hub token reaches
    the box only as a secret file (operations/secrets.py), never in a command line.

    + ckpt: the hub's description of the pinned commit (laguna_kit.hub.Checkpoint)
    + dest: the checkpoint folder on the box
    + endpoint: the hub
    + token_var: the control machine's environment variable with the hub token
    + kit_dir: the kit's folder on the box
    + workers: files fetched in parallel
    + margin_mib: free space kept beyond the download
    + rehash: hash every file once, whatever the record says
    + mirror: offline: a mirror folder on the control machine to push from instead of the hub

    **Example:**

    .. code:: python

        checkpoint_synced(name="target", ckpt=ckpt, dest="/models/Laguna-S-2.1-INT4", endpoint=HUB,
                          token_var="HF_TOKEN", kit_dir="/opt/laguna-kit", workers=4,
                          margin_mib=10240)
    """
    seen = host.get_fact(CheckpointState, path=dest)
    todo = hub.not_verified(ckpt, seen["stats"], seen["state"]) or (
        ["re-hash asked for"] if rehash else []
    )
    if not todo:
        host.noop(
            f"{ckpt.repo}@{ckpt.commit[:12]}: {len(ckpt.files)} files verified "
            f"({ckpt.size / 2**30:.2f} GiB), nothing hashed"
        )
        return
    state_dir = f"{kit_dir}/state"
    manifest_path = f"{state_dir}/{ckpt.folder}.manifest.json"
    # Every run's record (bytes fetched and hashed) feeds status and the benchmarks.
    log = f"append:{state_dir}/fetch-log.jsonl"
    unit = f"laguna-fetch-{ckpt.folder}"
    fetch = [
        "--repo",
        ckpt.repo,
        "--manifest",
        manifest_path,
        "--dest",
        dest,
        "--margin-mib",
        margin_mib,
        *(["--rehash"] if rehash else []),
    ]
    yield f"install -d -m 755 {shlex.quote(state_dir)} {shlex.quote(dest)}"
    yield FileUploadCommand(io.StringIO(json.dumps(hub.manifest(ckpt))), manifest_path)
    if mirror:  # offline: push what the box lacks from the control machine's mirror, verify there
        src = hub.mirror_folder(mirror, ckpt.repo, ckpt.commit)
        upload = f"{dest.rstrip('/')}.laguna-upload"  # same filesystem as dest: moved by rename
        paths = hub.unverified_paths(ckpt, seen["stats"], seen["state"])
        lacking = [p for p in paths if not os.path.isfile(os.path.join(src, p))]
        if lacking:
            raise OperationError(
                f"{ckpt.repo}@{ckpt.commit[:12]}: the mirror {src} lacks {', '.join(lacking)}"
            )
        dirs = sorted({os.path.dirname(f"{upload}/{p}") for p in paths} | {upload})
        yield "install -d -m 755 " + " ".join(shlex.quote(x) for x in dirs)
        for p in paths:
            yield FileUploadCommand(os.path.join(src, p), f"{upload}/{p}")
        yield transient(
            unit, tool_command(kit_dir, "laguna_fetch.py", *fetch, "--uploaded", upload), log
        )
        return
    token_file = secret_path(f"hf_token-{ckpt.folder}")
    fetch += ["--endpoint", endpoint, "--token-file", token_file, "--workers", workers]
    yield from with_secret(
        os.environ.get(token_var) or "",
        token_file,
        transient(unit, tool_command(kit_dir, "laguna_fetch.py", *fetch), log),
    )
