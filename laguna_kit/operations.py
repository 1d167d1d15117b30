"""Operations pyinfra lacks, written like its own: read facts, yield only what is needed."""

from __future__ import annotations

import io
import json
import shlex

from pyinfra import host
from pyinfra.api import OperationError, operation
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.files import FileContents
from pyinfra.facts.server import Command
from pyinfra.operations import files

APT_ENV = "DEBIAN_FRONTEND=noninteractive"
APT_INSTALL = ("apt-get install -y -q --no-install-recommends "
               "-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold")


def deep_merge(base: dict, wanted: dict) -> dict:
    """`wanted` laid over `base`: nested dicts merge, anything else is replaced."""
    out = dict(base)
    for key, value in wanted.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def read_json(path: str):
    lines = host.get_fact(FileContents, path=path)
    if lines is None:
        return None
    text = "\n".join(lines)
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OperationError(f"{path} on {host.name} is not valid JSON ({exc}); fix or remove it, "
                             f"the kit merges into it and will not overwrite it") from None


@operation()
def json_merged(path: str, wanted: dict, mode: str = "644"):
    """Merge `wanted` into the JSON object at `path`, keeping every key others wrote there."""
    current = read_json(path)
    if current is not None and not isinstance(current, dict):
        raise OperationError(f"{path} on {host.name} holds JSON that is not an object")
    merged = deep_merge(current or {}, wanted)
    if current is not None and merged == current:
        host.noop(f"{path} already holds {sorted(wanted)}")
        return
    yield from files.put._inner(src=io.StringIO(json.dumps(merged, indent=4) + "\n"), dest=path, mode=mode)


def _missing(packages: list[str]) -> list[str]:
    """Packages (optionally `name=version`) not installed at the wanted version."""
    installed = host.get_fact(DebPackages)
    out = []
    for spec in packages:
        name, _, version = spec.partition("=")
        if name not in installed or (version and version not in installed[name]):
            out.append(spec)
    return out


@operation()
def apt_present(packages: list[str], hold: bool = False):
    """Install what is missing, refreshing the index only then (so a converged box runs nothing).

    `hold` pins the installed versions (apt-mark hold) so unattended upgrades cannot swap a driver
    or runtime under running GPU containers.
    """
    missing = _missing(packages)
    if missing:
        yield f"{APT_ENV} apt-get update -q"
        yield f"{APT_ENV} {APT_INSTALL} {' '.join(missing)}"
    if hold:
        names = [p.partition("=")[0] for p in packages]
        held = set((host.get_fact(Command, command="apt-mark showhold") or "").split())
        todo = [n for n in names if n not in held]
        if todo:
            yield f"apt-mark hold {' '.join(todo)}"
    if not missing and not hold:
        host.noop(f"installed: {', '.join(packages)}")


# --- hardware and driver ------------------------------------------------------------------------

SUPPORTED_OS = {("Debian", 12), ("Ubuntu", 22), ("Ubuntu", 24)}


def _gpus_seen():
    """nvidia-smi's view when the driver is loaded, else the PCI bus's (memory may be unknown)."""
    from .facts import NvidiaSmiGpus, PciGpus

    smi = host.get_fact(NvidiaSmiGpus)
    return (smi["gpus"], "nvidia-smi") if smi["ok"] else (host.get_fact(PciGpus), "PCI bus")


@operation()
def preflight(gpu_count: int, gpu_min_memory_mib: int, model_dir: str, need_mib: int,
              min_ram_mib: int, min_shm_mib: int, early_problem: str | None = None):
    """Refuse the box, before anything on it changes, when it cannot serve the champion."""
    from pyinfra import logger
    from pyinfra.facts.server import Arch, LinuxDistribution

    from . import hardware
    from .facts import FreeSpaceMiB, MemTotalMiB, SecureBoot

    problems = [early_problem] if early_problem else []
    distro = host.get_fact(LinuxDistribution)
    if (distro.get("name"), distro.get("major")) not in SUPPORTED_OS:
        problems.append(f"found {distro.get('name')} {distro.get('major')}, need Debian 12 or Ubuntu 22.04/24.04")
    arch = host.get_fact(Arch)
    if arch != "x86_64":
        problems.append(f"found {arch}, need x86_64")
    gpus, source = _gpus_seen()
    problems += hardware.gpu_problems(gpus, gpu_count, gpu_min_memory_mib)
    free = host.get_fact(FreeSpaceMiB, path=model_dir)
    if free < need_mib:
        problems.append(f"found {free} MiB free at {model_dir}, need {need_mib} MiB (checkpoints not yet on "
                        f"disk plus margin): free space or point model_dir elsewhere")
    ram = host.get_fact(MemTotalMiB)
    if ram < min_ram_mib:
        problems.append(f"found {ram} MiB RAM, need {min_ram_mib} MiB")
    shm = host.get_fact(FreeSpaceMiB, path="/dev/shm")
    if shm < min_shm_mib:
        problems.append(f"found {shm} MiB free in /dev/shm, need {min_shm_mib} MiB (the container shares the "
                        f"host's IPC; NCCL needs it): enlarge /dev/shm (tmpfs size= in /etc/fstab)")
    if problems:
        raise OperationError(f"pre-flight refused {host.name}: " + "; ".join(problems)
                             + ". Nothing on the box was changed.")
    if host.get_fact(SecureBoot):
        logger.warning(f"{host.name}: UEFI Secure Boot is on: the NVIDIA kernel module must be signed "
                       "(Ubuntu: precompiled signed modules; Debian: DKMS with an enrolled MOK, see DEPLOYMENT.md)")
    host.noop(f"pre-flight passed: {hardware.describe(gpus)} (from the {source}), {free} MiB free at "
              f"{model_dir}, {ram} MiB RAM, {shm} MiB /dev/shm")
    yield from ()  # a check, never a change


@operation(is_idempotent=False)
def reboot_and_wait(timeout: int = 600):
    """Reboot and wait until the box is back *after* a reboot.

    pyinfra's server.reboot confirms by /proc/uptime, which a container (and so the test harness)
    does not reset; a marker in /run (a tmpfs on every systemd distro) is gone after any reboot.
    """
    import time

    yield "mkdir -p /run/laguna-kit && touch /run/laguna-kit/awaiting-reboot"
    yield "( sleep 1 && systemctl reboot ) </dev/null >/dev/null 2>&1 &"

    def wait(state, host):  # noqa: F811 - pyinfra passes these two by name
        time.sleep(3)
        host.disconnect()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            host.connect(show_errors=False)
            if host.connected:
                marker = host.get_fact(Command, command="test -e /run/laguna-kit/awaiting-reboot && echo "
                                                         "waiting || echo rebooted")
                if marker == "rebooted":
                    # Up is not booted: let the boot finish (module loads, DKMS) before the next step.
                    host.get_fact(Command, command=f"timeout {int(timeout)} systemctl is-system-running --wait; true")
                    return
                host.disconnect()
            time.sleep(2)
        raise OperationError(f"{host.name} did not come back from reboot within {timeout}s")

    from pyinfra.api import FunctionCommand

    yield FunctionCommand(wait, (), {})


@operation()
def nvidia_driver_loaded(allow_reboot: bool, reboot_timeout: int = 600):
    """The installed driver must be the running one; that takes a reboot after a fresh install."""
    from .facts import NvidiaSmiGpus

    smi = host.get_fact(NvidiaSmiGpus)
    if smi["ok"]:
        host.noop("NVIDIA driver loaded")
        return
    if not allow_reboot:
        raise OperationError(f"{host.name}: the NVIDIA driver is installed but not loaded "
                             f"(nvidia-smi: {smi['message'] or 'not installed'}): reboot the box and re-run, "
                             f"or set nvidia_allow_reboot=True to let the kit reboot it")
    yield from reboot_and_wait._inner(timeout=reboot_timeout)


def _nvidia_smi_settled(settle_s: int) -> dict:
    """nvidia-smi polled until it answers or `settle_s` passed: right after a reboot the module may
    still be loading (or DKMS still building it for a new kernel) while sshd already answers."""
    import time

    from .facts import NvidiaSmiGpus

    deadline = time.monotonic() + settle_s
    while True:
        smi = host.get_fact(NvidiaSmiGpus)
        if smi["ok"] or time.monotonic() >= deadline:
            return smi
        time.sleep(3)


@operation()
def nvidia_gpus_verified(gpu_count: int, gpu_min_memory_mib: int, driver_branch: str, settle_s: int = 180):
    """After the driver is in: nvidia-smi must see the GPUs the pre-flight counted, with their memory."""
    from . import hardware
    from .facts import NvidiaSmiGpus

    smi = host.get_fact(NvidiaSmiGpus)
    if not smi["ok"]:
        if not host.state.is_executing:
            host.noop("checked once the driver is loaded")
            return
        smi = _nvidia_smi_settled(settle_s)
    if not smi["ok"]:
        raise OperationError(f"{host.name}: nvidia-smi still fails {settle_s} s after the driver install and "
                             f"reboot: {smi['message']}")
    problems = hardware.gpu_problems(smi["gpus"], gpu_count, gpu_min_memory_mib)
    versions = {g.driver_version for g in smi["gpus"]}
    wrong = [v for v in versions if not v.startswith(f"{driver_branch}.")]
    if wrong:
        problems.append(f"driver {', '.join(sorted(wrong))} is loaded, nvidia_driver_branch is {driver_branch}")
    if problems:
        raise OperationError(f"{host.name}: " + "; ".join(problems))
    host.noop(f"nvidia-smi sees {hardware.describe(smi['gpus'])}, driver {', '.join(sorted(versions))}")
    yield from ()  # a check, never a change


@operation()
def nvidia_runtime_configured(config: str = "/etc/docker/daemon.json"):
    """`nvidia-ctk runtime configure` only when a read-only look at daemon.json says it is needed."""
    current = read_json(config) or {}
    if (current.get("runtimes") or {}).get("nvidia"):
        host.noop("docker already has the nvidia runtime")
        return
    yield f"nvidia-ctk runtime configure --runtime=docker --config={config}"


@operation()
def docker_config_applied():
    """Restart dockerd when daemon.json changed after it started (by the kit's merge or nvidia-ctk)."""
    from .facts import DockerConfigState

    st = host.get_fact(DockerConfigState)
    if st["started"] is None or st["config_mtime"] is None or st["config_mtime"] <= st["started"]:
        host.noop("dockerd runs with the current daemon.json")
        return
    yield "systemctl restart docker.service"


# --- checkpoints --------------------------------------------------------------------------------

@operation()
def checkpoint_synced(ckpt, dest: str, endpoint: str, token_var: str, kit_dir: str, workers: int,
                      margin_mib: int, rehash: bool = False, mirror: str = ""):
    """The pinned checkpoint is in `dest`, every file verified against the hub's hash.

    Judged from stat and the box's verification record: a converged box is not hashed. Otherwise
    files/laguna_fetch.py runs on the box (resume, hash, quarantine, one re-fetch). The hub token
    travels as an uploaded 0600 file, removed when the fetch ends; it is never in a command line.
    """
    import os

    from pyinfra.api import FileUploadCommand

    from . import hub
    from .facts import CheckpointState

    seen = host.get_fact(CheckpointState, path=dest)
    todo = hub.not_verified(ckpt, seen["stats"], seen["state"]) or (["re-hash asked for"] if rehash else [])
    if not todo:
        host.noop(f"{ckpt.repo}@{ckpt.commit[:12]}: {len(ckpt.files)} files verified "
                  f"({ckpt.size / 2**30:.2f} GiB), nothing hashed")
        return
    state_dir = f"{kit_dir}/state"
    manifest_path = f"{state_dir}/{ckpt.folder}.manifest.json"
    yield f"install -d -m 755 {shlex.quote(state_dir)} {shlex.quote(dest)}"
    yield FileUploadCommand(io.StringIO(json.dumps(hub.manifest(ckpt))), manifest_path)
    if mirror:  # offline: push what the box lacks from the control machine's mirror, then verify it there
        src = hub.mirror_folder(mirror, ckpt.repo, ckpt.commit)
        upload = f"{dest.rstrip('/')}.laguna-upload"  # beside dest: same filesystem, moved by rename
        paths = hub.unverified_paths(ckpt, seen["stats"], seen["state"])
        missing = [p for p in paths if not os.path.isfile(os.path.join(src, p))]
        if missing:
            raise OperationError(f"{ckpt.repo}@{ckpt.commit[:12]}: the mirror {src} lacks {', '.join(missing)}")
        dirs = sorted({os.path.dirname(f"{upload}/{p}") for p in paths} | {upload})
        yield "install -d -m 755 " + " ".join(shlex.quote(x) for x in dirs)
        for p in paths:
            yield FileUploadCommand(os.path.join(src, p), f"{upload}/{p}")
        fetch = " ".join(shlex.quote(a) for a in [
            f"{kit_dir}/venv/bin/python", f"{kit_dir}/bin/laguna_fetch.py", "--repo", ckpt.repo,
            "--manifest", manifest_path, "--dest", dest, "--uploaded", upload,
            "--margin-mib", str(margin_mib)] + (["--rehash"] if rehash else []))
        yield f"{fetch} >> {state_dir}/fetch-log.jsonl"
        return
    token_file = f"{kit_dir}/secrets/hf_token"
    token = os.environ.get(token_var) or ""
    if token:
        yield f"install -d -m 700 {kit_dir}/secrets"
        yield FileUploadCommand(io.StringIO(token), token_file)
        yield f"chmod 600 {token_file}"
    fetch = " ".join(shlex.quote(a) for a in [
        f"{kit_dir}/venv/bin/python", f"{kit_dir}/bin/laguna_fetch.py", "--repo", ckpt.repo,
        "--manifest", manifest_path, "--dest", dest, "--endpoint", endpoint, "--token-file", token_file,
        "--workers", str(workers), "--margin-mib", str(margin_mib)] + (["--rehash"] if rehash else []))
    # The record of every run (bytes fetched and hashed) feeds status and the benchmarks.
    yield (f"{fetch} >> {state_dir}/fetch-log.jsonl; rc=$?; rm -f {token_file}; exit $rc")


# --- image, releases, validation -----------------------------------------------------------------

@operation()
def image_present(ref: str):
    """Pull the pinned tag once; a re-run with the tag already present (same digest) does nothing."""
    from .facts import DockerImageDigest

    digest = host.get_fact(DockerImageDigest, ref=ref)
    if digest:
        host.noop(f"{ref} present ({digest})")
        return
    yield f"docker pull -q {ref}"


def _wrap(words: list[str], width: int = 96) -> str:
    """ExecStart= words on continuation lines, a flag kept with its value."""
    lines, line = [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > width and not (w[:1] != "-" and line.split()[-1].startswith("-")):
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    return " \\\n    ".join(lines + [line])


def render_release(knobs: dict, digest: str | None) -> tuple[dict, str]:
    """(release.json spec, unit text with @RELEASE@ for the number) for the knobs' serving mode."""
    import hashlib

    import jinja2

    from . import profiles
    from .hub import is_pinned
    from .settings import KIT_ROOT

    serving = profiles.render(knobs, digest)
    exec_start = _wrap([profiles.systemd_quote(a) for a in ["/usr/bin/docker", *serving.argv()[1:]]])
    template = jinja2.Template((KIT_ROOT / "files/laguna-vllm.service.j2").read_text(),
                               undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    unit = template.render(release="@RELEASE@", mode=serving.mode, served_name=knobs["served_model_name"],
                           container_name=knobs["container_name"], exec_start=exec_start,
                           start_limit_interval_s=knobs["start_limit_interval_s"],
                           start_limit_burst=knobs["start_limit_burst"], ready_timeout_s=knobs["ready_timeout_s"])
    spec = {"mode": serving.mode, "image": knobs["vllm_image"], "image_digest": digest,
            "target_repo": knobs["target_repo"], "target_revision": knobs["target_revision"],
            "drafter_repo": knobs["drafter_repo"], "drafter_revision": knobs["drafter_revision"],
            "argv": serving.argv(), "derived": serving.derived, "forced": serving.warnings,
            # The checkpoint revisions this release runs: activating it (a rollback) puts them back.
            "checkpoints": [{"dest": f"{knobs['model_dir']}/{repo.split('/')[-1]}", "revision": rev}
                            for repo, rev in ((knobs["target_repo"], knobs["target_revision"]),
                                              (knobs["drafter_repo"], knobs["drafter_revision"]))
                            if is_pinned(rev)],
            # The gate this release must pass, kept with it so a rollback validates the restored mode.
            "gate": {"url": f"http://127.0.0.1:{knobs['api_port']}/v1", "model": knobs["served_model_name"],
                     "prompt_tokens": serving.gate_prompt_tokens, "max_tokens": knobs["gate_max_tokens"],
                     "timeout": knobs["gate_timeout_s"], "ready_timeout": knobs["ready_timeout_s"],
                     "dflash": bool(serving.speculative), "min_acceptance": knobs["dflash_min_acceptance"]},
            "unit_sha256": hashlib.sha256(unit.encode()).hexdigest()}
    return spec, unit


@operation()
def release_deployed(knobs: dict, kit_dir: str, unit: str):
    """A numbered release for the wanted image digest, revisions and flags is the running one.

    Nothing happens when the current release already is exactly that; otherwise the box's release
    manager numbers it, installs the unit (daemon-reload only when the file changed) and restarts.
    """
    from pyinfra.api import FileUploadCommand

    from .facts import DockerImageDigest, ReleaseState

    digest = host.get_fact(DockerImageDigest, ref=knobs["vllm_image"])
    spec, unit_text = render_release(knobs, digest)
    st = host.get_fact(ReleaseState, kit_dir=kit_dir, unit=unit)
    current = st["current"]
    if current and current.get("spec") == spec:
        if st["unit"]["active"]:
            host.noop(f"release {current.get('number')} ({spec['mode']}, {digest}) is current")
        else:  # stopped by an operator, or a crash loop that systemd gave up on: start it (the gate follows)
            yield f"systemctl reset-failed {shlex.quote(unit)} 2>/dev/null; systemctl start {shlex.quote(unit)}"
        return
    if current:
        from pyinfra import logger

        old = current.get("spec") or {}
        changed = sorted(k for k in set(spec) | set(old) if spec.get(k) != old.get(k))
        logger.info(f"{host.name}: new release replaces {current.get('number')}: {', '.join(changed)} changed")
    incoming = f"{kit_dir}/releases/incoming"
    yield f"rm -rf {incoming} && install -d -m 755 {incoming}"
    yield FileUploadCommand(io.StringIO(json.dumps({"mode": spec["mode"], "image": spec["image"],
                                                     "target_revision": spec["target_revision"],
                                                     "drafter_revision": spec["drafter_revision"],
                                                     "spec": spec}, indent=1)), f"{incoming}/release.json")
    yield FileUploadCommand(io.StringIO(unit_text), f"{incoming}/{unit}")
    yield f"python3 {kit_dir}/bin/laguna_release.py --kit-dir {kit_dir} --unit {unit} install-incoming"


def gate_command(kit_dir: str, unit: str) -> str:
    """The gate for whichever release is current (its parameters are in its release.json)."""
    return (f"{kit_dir}/venv/bin/python {kit_dir}/bin/laguna_gate.py --kit-dir {kit_dir} --unit {unit} "
            f"--result {kit_dir}/state/last-gate.json >/dev/null")


@operation()
def release_validated(kit_dir: str, unit: str, auto_rollback: bool = True):
    """The current release passed the gate (readiness, smoke, fresh long prompt, DFlash acceptance).

    Run when the current release has no passing gate yet. On failure with auto_rollback, the
    previous release is restored and validated, and the deploy still fails, saying both.
    """
    from .facts import ReleaseState

    st = host.get_fact(ReleaseState, kit_dir=kit_dir, unit=unit)
    current = (st["state"] or {}).get("current")
    gate, since = st["gate"] or {}, st["unit"]["since"]
    # A pass proves only the run it tested: a restart since (crash, reboot, operator) needs a new one.
    if (current is not None and gate.get("release") == current and gate.get("passed") and st["unit"]["active"]
            and since is not None and since <= gate.get("started_unix", 0)):
        host.noop(f"release {current} passed the gate at {gate.get('time')}")
        return
    cmd = gate_command(kit_dir, unit)
    release = f"python3 {kit_dir}/bin/laguna_release.py --kit-dir {kit_dir} --unit {unit}"
    if not auto_rollback:
        yield cmd
        return
    yield (f"{cmd} || {{ echo 'laguna: the gate failed: rolling back to the previous release' >&2; "
           f"if {release} rollback; then {cmd} && echo 'laguna: the previous release serves and passed the gate' >&2"
           f" || echo 'laguna: the previous release FAILED the gate too: stop and diagnose (TROUBLESHOOTING.md)' >&2;"
           f" fi; exit 1; }}")


@operation(is_idempotent=False)
def release_rolled_back(kit_dir: str, unit: str, to: int | None = None):
    """Activate the previous release (or release `to`) with the box's release manager."""
    from .facts import ReleaseState

    st = host.get_fact(ReleaseState, kit_dir=kit_dir)["state"] or {}
    if st.get("current") is None:
        raise OperationError(f"{host.name}: no release is installed: nothing to roll back")
    target = f" --to {int(to)}" if to is not None else ""
    yield f"python3 {kit_dir}/bin/laguna_release.py --kit-dir {kit_dir} --unit {unit} rollback{target}"


# --- operator views (report, never change) ------------------------------------------------------

@operation()
def serving_reported(kit_dir: str, unit: str, port: int):
    """Log unit state, release, digest, GPU memory, endpoint health and the last gate result."""
    from pyinfra import logger

    from .facts import ReleaseState, ServingStatus

    st = host.get_fact(ServingStatus, unit=unit, port=port)
    rel = host.get_fact(ReleaseState, kit_dir=kit_dir)
    cur, gate = rel["current"] or {}, rel["gate"] or {}
    spec = cur.get("spec") or {}
    lc = gate.get("long_context") or {}
    lines = [
        f"unit {unit}: {st.get('unit') or 'unknown'}; /health: HTTP {st.get('health') or 'no answer'}",
        f"release {cur.get('number', 'none')} ({spec.get('mode', '-')}) since {cur.get('created', '-')}: "
        f"{spec.get('image', '-')} {spec.get('image_digest') or ''}",
        f"target {str(spec.get('target_revision'))[:12]}, drafter {str(spec.get('drafter_revision'))[:12]}",
        f"GPU memory used/total MiB: {st.get('gpu_mem') or 'nvidia-smi unavailable'}",
        ("last gate: " + ("passed" if gate.get("passed") else f"FAILED ({gate.get('error')})")
         + f" on release {gate.get('release')} at {gate.get('time')}"
         + (f": {lc.get('prompt_tokens')} prompt tokens in {lc.get('elapsed_s')} s" if lc else "")) if gate
        else "last gate: none recorded",
    ]
    for line in lines:
        logger.info(f"[{host.name}] {line}")
    host.noop("; ".join(lines))
    yield from ()


@operation()
def journal_reported(unit: str, lines: int):
    """Log the unit's journal: vLLM's own output (a crash loop's first failure is in here)."""
    from pyinfra import logger

    text = host.get_fact(Command, command=f"journalctl -u {unit} --no-pager -n {int(lines)} 2>&1 || true") or ""
    for line in text.splitlines():
        logger.info(f"[{host.name}] {line}")
    host.noop(f"{len(text.splitlines())} journal lines of {unit}")
    yield from ()


# --- tailnet and firewall -----------------------------------------------------------------------

@operation()
def tailscale_joined(auth_key_env: str, kit_dir: str, hostname: str = "", tags: list[str] = ()):
    """The box is on the tailnet. A joined box is left alone; otherwise the auth key (from the control
    machine's environment) goes up as a 0600 file for `--auth-key=file:` and is removed."""
    import os

    from pyinfra.api import FileUploadCommand

    from .facts import TailscaleStatus

    st = host.get_fact(TailscaleStatus)
    if st.get("BackendState") == "Running":
        host.noop(f"on the tailnet as {', '.join(st.get('Self', {}).get('TailscaleIPs', []))}")
        return
    key = os.environ.get(auth_key_env, "")
    if not key:
        if not host.state.is_executing:
            host.noop("joined once tailscaled runs")
            return
        raise OperationError(f"{host.name} is not on the tailnet and {auth_key_env} is not set on the control "
                             f"machine: export {auth_key_env}=tskey-auth-... (an auth key) and re-run")
    key_file = f"{kit_dir}/secrets/tailscale-authkey"
    yield f"install -d -m 700 {kit_dir}/secrets"
    yield FileUploadCommand(io.StringIO(key), key_file)
    yield f"chmod 600 {key_file}"
    extra = (f" --hostname={hostname}" if hostname else "") + (f" --advertise-tags={','.join(tags)}" if tags else "")
    yield f"tailscale up --auth-key=file:{key_file}{extra}; rc=$?; rm -f {key_file}; exit $rc"


@operation()
def ssh_over_tailnet_checked(ssh_port: int):
    """Before SSH is made tailnet-only: this very run must be connected over the tailnet.

    The address pyinfra uses (resolved on the control machine) has to be one of the box's own
    tailnet addresses; otherwise the rule would end this operator's access at the next login.
    """
    import socket

    from .facts import TailscaleStatus

    if not host.state.is_executing:
        host.noop("checked when the box is on the tailnet")
        return
    mine = set(host.get_fact(TailscaleStatus).get("Self", {}).get("TailscaleIPs") or [])
    address = host.data.get("ssh_hostname") or host.name
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(address, ssh_port, proto=socket.IPPROTO_TCP)}
    except OSError:
        resolved = set()
    if not mine:
        raise OperationError(f"{host.name}: ssh_tailnet_only is set but the box has no tailnet address yet; "
                             "the firewall was not changed")
    if not resolved & mine:
        raise OperationError(
            f"{host.name}: ssh_tailnet_only is set but this run reaches the box at {address} "
            f"({', '.join(sorted(resolved)) or 'unresolved'}), not over the tailnet "
            f"({', '.join(sorted(mine))}). Connect over the tailnet first (set the host's address to "
            f"{sorted(mine)[0]} or its MagicDNS name) and re-run; the firewall was not changed, SSH stays open")
    host.noop(f"this run is connected over the tailnet ({address}): SSH may be limited to tailscale0")
    yield from ()


@operation()
def firewall_applied(rules: str, confirm_timeout_s: int):
    """Load the kit's nftables table atomically, with an automatic revert unless a *new* SSH
    connection confirms within `confirm_timeout_s` (so a rule that cuts the operator off undoes itself)."""
    from pyinfra.api import FunctionCommand

    current = host.get_fact(Command, command="nft -s list table inet laguna_kit 2>/dev/null | sha256sum; "
                                              f"sha256sum {rules} 2>/dev/null; cat {rules}.loaded 2>/dev/null; true")
    parts = (current or "").split()
    # Loaded = the file's hash was recorded at load time and the live table still hashes the same.
    if len(parts) >= 6 and parts[2] == parts[4] and parts[0] == parts[5]:
        host.noop("firewall table loaded and unchanged")
        return
    yield f"nft -c -f {rules}"
    yield (f"systemctl stop laguna-firewall-revert.timer 2>/dev/null; systemd-run --quiet "
           f"--unit laguna-firewall-revert --on-active={int(confirm_timeout_s)} /usr/sbin/nft delete table inet laguna_kit")
    yield f"nft -f {rules}"

    def reconnect(state, host):
        host.disconnect()
        host.connect(show_errors=True)
        if not host.connected:
            raise OperationError(f"{host.name}: no new SSH connection after the firewall change: it reverts itself "
                                 f"in {confirm_timeout_s} s")

    yield FunctionCommand(reconnect, (), {})
    yield (f"systemctl stop laguna-firewall-revert.timer laguna-firewall-revert.service 2>/dev/null; "
           f"echo \"$(sha256sum {rules} | cut -d' ' -f1) $(nft -s list table inet laguna_kit | sha256sum | cut -d' ' -f1)\""
           f" > {rules}.loaded")
