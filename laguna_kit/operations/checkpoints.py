"""Checkpoints on the box: every file verified against the hub's own hash."""

from __future__ import annotations

import io
import json
import os
import shlex
import time

from pyinfra import host, logger
from pyinfra.api import (
    FileUploadCommand,
    FunctionCommand,
    OperationError,
    StringCommand,
    operation,
)
from pyinfra.facts.files import FileContents
from pyinfra.facts.server import Command

from ..boxtools.layout import RUN_DIR, SECRETS_DIR
from ..domain import fleet, hub, peer_fetch_plan
from ..domain.box_commands import running, systemd_run, tool_command, transient
from ..facts.checkpoints import CheckpointState, DownloadProgress
from ..run import download_progress, interrupt
from .secrets import secret_path


def _memory(state) -> dict:
    """What this run (pyinfra's state) knows of its downloads, as (host, unit) pairs:
    "started": started or found running, so the models step waits for that one instead of
    starting another (set when the command runs, not when the plan is made); "verified": found
    verified when the download step executed; later steps need not look again, but a box that
    re-verified files a peer refused (peer_refusals_scrubbed) forgets both, to fetch anew."""
    mem = getattr(state, "laguna_downloads", None)
    if mem is None:
        mem = {"started": set(), "verified": set()}
        state.laguna_downloads = mem
    return mem


class Fetch:
    """Where one checkpoint's box-side download keeps its things, and its command line."""

    def __init__(
        self,
        ckpt,
        dest,
        endpoint,
        token_var,
        kit_dir,
        workers,
        margin_mib,
        rehash,
        retries,
        backoff_max_s,
        read_timeout_s,
    ):
        self.ckpt, self.dest, self.kit_dir = ckpt, dest, kit_dir
        self.token_var = token_var
        self.unit = f"laguna-fetch-{ckpt.folder}"
        self.state_dir = f"{kit_dir}/state"
        self.manifest = f"{self.state_dir}/{ckpt.folder}.manifest.json"
        self.sources = f"{self.state_dir}/{ckpt.folder}.sources.json"
        # Every run's record (bytes fetched and hashed) feeds status and the benchmarks.
        self.log = f"{self.state_dir}/fetch-log.jsonl"
        self.err = f"{RUN_DIR}/{self.unit}.err"
        self.rc = f"{RUN_DIR}/{self.unit}.rc"
        self.progress = f"{RUN_DIR}/{self.unit}.progress.json"
        self.token_file = secret_path(f"hf_token-{ckpt.folder}")
        self.args = [
            "--repo", ckpt.repo, "--manifest", self.manifest, "--dest", dest,
            "--margin-mib", margin_mib, *(["--rehash"] if rehash else []),
            "--endpoint", endpoint, "--workers", workers, "--progress", self.progress,
            "--retries", retries, "--backoff-max-s", backoff_max_s,
            "--read-timeout-s", read_timeout_s,
        ]  # fmt: skip

    def prepared(self):
        yield f"install -d -m 755 {shlex.quote(self.state_dir)} {shlex.quote(self.dest)}"
        yield FileUploadCommand(io.StringIO(json.dumps(hub.manifest(self.ckpt))), self.manifest)

    def started(self, keep_finished: bool):
        """Start the download as a transient unit that outlives this SSH session, unless it runs
        already (or, with keep_finished, already ended well in this run). The token goes in on
        stdin, into a file on /run that the fetch deletes once read. In a fleet, the fleet's peers
        are its first sources (laguna_kit/domain/peer_fetch_plan.py)."""
        token = os.environ.get(self.token_var) or ""
        args = [*self.args, *(["--token-file", self.token_file] if token else [])]
        doc = peer_fetch_plan.sources_doc(
            host, self.ckpt, hub.manifest(self.ckpt)["files"], os.path.basename(self.progress)
        )
        if doc is not None:
            yield FileUploadCommand(io.StringIO(json.dumps(doc)), self.sources)
            args += ["--sources", self.sources]
        result = f'echo "$? {self.ckpt.commit}" > {shlex.quote(self.rc)}'
        script = f"{tool_command(self.kit_dir, 'laguna_fetch.py', *args)}; {result}"
        unit = systemd_run(
            self.unit, f"StandardOutput=append:{self.log}", f"StandardError=truncate:{self.err}"
        )
        run = f"{unit} /bin/sh -c {shlex.quote(script)}"
        q = shlex.quote
        skip = running(self.unit)
        if keep_finished:
            skip += f' || [ "$(cat {q(self.rc)} 2>/dev/null)" = "0 {self.ckpt.commit}" ]'
        take = f"umask 077 && cat > {q(self.token_file)} && umask 022 && " if token else ""
        cmd = (
            f"install -d -m 755 {RUN_DIR} && install -d -m 700 {SECRETS_DIR} && "
            f"if {skip}; then cat > /dev/null; else {take}rm -f {q(self.rc)} && {run}; fi"
        )
        yield StringCommand(cmd, _stdin=token or "\n")
        key = (host.name, self.unit)
        yield FunctionCommand(lambda state, host: _memory(state)["started"].add(key), (), {})

    def waited(self):
        yield FunctionCommand(
            lambda state, host: wait_for_fetch(host, self.unit, self.progress), (), {}
        )
        q = shlex.quote
        yield (
            f"rc=$(cat {q(self.rc)} 2>/dev/null); "
            f'[ "$rc" = "0 {self.ckpt.commit}" ] && exit 0; '
            f"rm -f {q(self.token_file)}; cat {q(self.err)} >&2 2>/dev/null; "
            f'[ -n "$rc" ] || echo "laguna-fetch: {self.ckpt.repo}: the download stopped without '
            'a result (stopped by hand, or the box restarted): re-run to resume" >&2; exit 2'
        )


def wait_for_fetch(host, unit: str, progress_path: str) -> None:
    """Wait while the box-side download runs, printing its progress at least every 30 s."""
    last = None
    while True:
        out = host.get_fact(
            Command,
            command=f"if {running(unit)}; then echo running; else echo ended; fi; "
            f"cat {shlex.quote(progress_path)} 2>/dev/null; true",
        )
        lines = (out or "").splitlines()
        going = bool(lines) and lines[0].strip() == "running"
        try:
            rec = json.loads(lines[1]) if len(lines) > 1 else None
        except ValueError:
            rec = None
        now = time.monotonic()
        if rec and (not going or last is None or now - last >= download_progress.PRINT_EVERY_S):
            logger.info(f"[{host.name}] download {download_progress.line(rec)}")
            last = now
        if not going:
            return
        interrupt.check()
        time.sleep(download_progress.POLL_S)
        interrupt.check()


def _todo(ckpt, dest, rehash):
    seen = host.get_fact(CheckpointState, path=dest)
    return seen, hub.not_verified(ckpt, seen["stats"], seen["state"]) or (
        ["re-hash asked for"] if rehash else []
    )


def _verified_noop(ckpt):
    host.noop(
        f"{ckpt.repo}@{ckpt.commit[:12]}: {len(ckpt.files)} files verified "
        f"({ckpt.size / 2**30:.2f} GiB), nothing hashed"
    )


@operation()
def checkpoint_fetch_started(
    ckpt,
    dest: str,
    endpoint: str,
    token_var: str,
    kit_dir: str,
    workers: int,
    margin_mib: int,
    rehash: bool = False,
    mirror: str = "",
    retries: int = 5,
    backoff_max_s: float = 60,
    read_timeout_s: float = 60,
):
    """
    Start the checkpoint's download on the box, not waiting for it: it needs neither the driver
    nor Docker, so it runs while they are installed. `checkpoint_synced` waits for it later.

    Called again after a step that may reboot the box (the driver), it goes on with a download
    this run started; one it found verified is not looked at again. Arguments as
    `checkpoint_synced`'s. Offline (`mirror`), nothing starts here: the push from the control
    machine happens in `checkpoint_synced`.

    **Example:**

    .. code:: python

        checkpoint_fetch_started(name="target", ckpt=ckpt, dest="/models/Laguna-S-2.1-INT4",
                                 endpoint=HUB, token_var="HF_TOKEN", kit_dir="/opt/laguna-kit",
                                 workers=4, margin_mib=10240)
    """
    if mirror:
        host.noop(f"{ckpt.repo}: offline, pushed from the mirror at the models step")
        return
    key = (host.name, f"laguna-fetch-{ckpt.folder}")
    if (
        key in _memory(host.state)["verified"]
    ):  # an earlier call in this run (deploy.py calls it again after the driver)
        _verified_noop(ckpt)
        return
    _, todo = _todo(ckpt, dest, rehash)
    if not todo:
        if host.state.is_executing:
            _memory(host.state)["verified"].add(key)
        _verified_noop(ckpt)
        return
    f = Fetch(ckpt, dest, endpoint, token_var, kit_dir, workers, margin_mib, rehash, retries,
              backoff_max_s, read_timeout_s)  # fmt: skip
    yield from f.prepared()
    yield from f.started(keep_finished=False)


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
    retries: int = 5,
    backoff_max_s: float = 60,
    read_timeout_s: float = 60,
):
    """
    The pinned checkpoint is in `dest`, every file verified against the hub's hash.

    Judged from stat and the box's verification record: a converged box is not hashed. Otherwise
    the box's laguna_fetch.py runs in a transient unit (resume, retries, hash as received,
    quarantine, one re-fetch): the one `checkpoint_fetch_started` began earlier in this run, or
    one started now (a run without that step, or a download the driver's reboot ended). The wait
    prints the download's progress at least every 30 s. The hub token reaches the box only on a
    command's stdin (operations/secrets.py), never in a command line.

    + ckpt: the hub's description of the pinned commit (laguna_kit.domain.hub.Checkpoint)
    + dest: the checkpoint folder on the box
    + endpoint: the hub
    + token_var: the control machine's environment variable with the hub token
    + kit_dir: the kit's folder on the box
    + workers: files fetched in parallel
    + margin_mib: free space kept beyond the download
    + rehash: hash every file once, whatever the record says
    + mirror: offline: a mirror folder on the control machine to push from instead of the hub
    + retries: attempts per file without progress before the download fails
    + backoff_max_s: the longest pause between two attempts
    + read_timeout_s: a transfer silent this long is retried

    **Example:**

    .. code:: python

        checkpoint_synced(name="target", ckpt=ckpt, dest="/models/Laguna-S-2.1-INT4", endpoint=HUB,
                          token_var="HF_TOKEN", kit_dir="/opt/laguna-kit", workers=4,
                          margin_mib=10240)
    """
    if (host.name, f"laguna-fetch-{ckpt.folder}") in _memory(host.state)["verified"]:
        _verified_noop(ckpt)
        return
    seen, todo = _todo(ckpt, dest, rehash)
    f = Fetch(ckpt, dest, endpoint, token_var, kit_dir, workers, margin_mib, rehash, retries,
              backoff_max_s, read_timeout_s)  # fmt: skip
    started_here = (host.name, f.unit) in _memory(host.state)["started"]
    if not todo and not started_here:
        _verified_noop(ckpt)
        return
    if mirror:  # offline: push what the box lacks from the control machine's mirror, verify there
        yield from f.prepared()
        src = hub.mirror_folder(mirror, ckpt.repo, ckpt.commit)
        upload = f"{dest.rstrip('/')}.laguna-upload"  # same filesystem as dest: moved by rename
        paths = hub.unverified_paths(ckpt, seen["stats"], seen["state"])
        lacking = [p for p in paths if not os.path.isfile(os.path.join(src, p))]
        if lacking:
            raise OperationError(
                f"{ckpt.repo}@{ckpt.commit[:12]}: the mirror {src} lacks {', '.join(lacking)}"
            )
        dirs = sorted({os.path.dirname(f"{upload}/{p}") for p in paths} | {upload})
        yield "install -d -m 755 " + shlex.join(dirs)
        for p in paths:
            yield FileUploadCommand(os.path.join(src, p), f"{upload}/{p}")
        args = [a for a in f.args]
        cut = args.index("--endpoint")
        args = args[:cut] + ["--progress", f.progress]  # no hub, no workers, no retries offline
        yield transient(
            f.unit,
            tool_command(kit_dir, "laguna_fetch.py", *args, "--uploaded", upload),
            f"append:{f.log}",
        )
        return
    if not started_here:
        yield from f.prepared()
    yield from f.started(keep_finished=started_here)
    yield from f.waited()


@operation()
def peer_refusals_scrubbed(ckpts: list, model_dir: str, kit_dir: str):
    """
    The files a fleet box refused from this one (their bytes failed the hash there) are re-hashed
    here against this box's record in the same run: one that rotted on disk is quarantined and
    leaves the record, so no peer takes it from here again and the fetch that follows brings it
    back; a sound one stays. Each refusal is judged once (kit_dir/state/peer-refusals.json). A box
    that refused a file from a host outside this run (`--limit`) says which, and what to run.

    + ckpts: this box's checkpoints (hub.Checkpoint)
    + model_dir: the folder their folders are in
    + kit_dir: the kit's folder on the box

    **Example:**

    .. code:: python

        peer_refusals_scrubbed(name="Files a peer refused from here, re-verified",
                               ckpts=[target, drafter], model_dir="/models",
                               kit_dir="/opt/laguna-kit")
    """
    files = {c.repo: {f.path for f in c.files} for c in ckpts}
    records = {}
    for other in fleet.gpu_hosts(host.state.inventory):
        try:
            records[other.name] = fleet.fact_of(other, DownloadProgress) or []
        except Exception as exc:  # noqa: BLE001 - a box this run cannot read refused nothing known
            logger.warning(f"{other.name}: cannot read its fetch records ({exc})")
    found = peer_fetch_plan.refusals(records, files)
    active = {h.name for h in host.state.active_hosts}
    for r in found:
        if r["by"] == host.name and r["from"] not in active:
            logger.warning(
                f"{host.name}: {r['path']} from the fleet box {r['from']} failed its hash here; "
                f"{r['from']} is not in this run: deploy it too (it re-verifies that file and "
                "fetches it again if it rotted)"
            )
    ledger = f"{kit_dir}/state/peer-refusals.json"
    checked = _judged(host.get_fact(FileContents, path=ledger))
    mine = [r for r in found if r["from"] == host.name]
    todo = [r for r in mine if r["id"] not in checked]
    if not todo:
        host.noop("no fleet box refused a file from this one since it was last re-verified")
        return
    for c in ckpts:
        paths = sorted({r["path"] for r in todo if r["repo"] == c.repo})
        if paths:
            args = ["--dest", f"{model_dir}/{c.folder}"] + [w for p in paths for w in ("--file", p)]
            # (1: a file rotted and was quarantined, as expected here; more is an error)
            yield f"{tool_command(kit_dir, 'laguna_scrub.py', *args)}; [ $? -le 1 ]"
            yield FunctionCommand(_forget, (f"laguna-fetch-{c.folder}",), {})
    ids = json.dumps(sorted({r["id"] for r in mine}))
    yield f"printf '%s\\n' {shlex.quote(ids)} > {shlex.quote(ledger)}"


def _forget(state, host, unit: str) -> None:
    """This run's download memory of `unit` on `host` is gone: the next checkpoint_synced judges
    the folder from the box again (and starts a fetch for what the scrub quarantined)."""
    for kind in ("started", "verified"):
        _memory(state)[kind].discard((host.name, unit))


def _judged(lines) -> set[str]:
    """The refusals already judged on this box (its ledger; anything but a list of text: none)."""
    try:
        doc = json.loads("\n".join(lines or []) or "[]")
    except ValueError:
        return set()
    return {x for x in doc if isinstance(x, str)} if isinstance(doc, list) else set()
