"""One serving mode (a row of group_data's serving_profiles) turned into the container's command
line, and that into a release: the unit file and its release.json.

Everything the unit, the dry-run printout and the docs show comes from `render()`, so they cannot
disagree; following a knob from group_data to the unit goes through this module only. Values the
recipe saw crash are refused here unless `force_unsafe` is set.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import jinja2

from .. import KIT_ROOT
from ..knobs.declared import checkpoint_pairs
from ..knobs.shapes import PROFILE_FIELDS
from . import images
from .hub import is_pinned

CONTAINER_CACHE = "/root/.cache/huggingface"  # where the recipe mounts the model cache
# The checkpoint's code (--trust-remote-code): transformers writes it under HF_MODULES_CACHE,
# $HF_HOME/modules by default, inside the read-only model mount (EROFS at the first start:
# transformers/dynamic_module_utils.py init_hf_modules). In the container's own writable layer
# instead; it is written again at every start.
MODULES_CACHE = "/tmp/hf_modules"
# vLLM's compile cache (torch.compile and inductor artefacts, keyed by vLLM's version and the
# config: vllm/compilation, VLLM_CACHE_ROOT defaults to ~/.cache/vllm): on the box, one folder per
# replica and image, so a restart, a crash restart or a rollback to the same image loads instead
# of compiling; pruned with the image (boxtools/release/prune.py).
CONTAINER_COMPILE_CACHE = "/root/.cache/vllm"
COMPILE_CACHE_MIB = 2048  # counted per replica in the disk pre-flight (derived: not published)


def compile_cache(get, digest: str | None) -> str:
    """The host folder of this replica's compile cache for this image."""
    image = (digest or "").split(":")[-1][:16] or "unpinned"
    return f"{get('compile_cache_dir')}/{get('container_name')}/{image}"


# A profile row's values; serving_overrides may change any of them for the chosen mode.


class ProfileError(ValueError):
    pass


@dataclass
class Serving:
    mode: str
    image: str  # what to run: repo@digest once pulled, else the tag
    docker_args: list[str]
    vllm_args: list[str]
    gate_prompt_tokens: int
    max_model_len: int | None
    speculative: dict | None
    derived: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def argv(self) -> list[str]:
        return ["docker", "run", *self.docker_args, self.image, *self.vllm_args]


def _unsafe(d, profile, extra_args: list[str], env: dict) -> list[str]:
    out = []
    gmu = profile.get("gpu_memory_utilization")
    if profile.get("dflash_tokens") and gmu is not None and gmu >= 0.90:
        out.append(
            f"gpu_memory_utilization {gmu} with DFlash: the first-generation DFlash buffer OOMed "
            f"at 0.90 "
            "(keep <= 0.87 without a full long-context gate)"
        )
    if env.get("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS") == "0":
        out.append(
            "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 disables the CUDA-graph memory estimate: "
            "both "
            "recipe tries crashed later"
        )
    if "--disable-hybrid-kv-cache-manager" in extra_args:
        out.append("--disable-hybrid-kv-cache-manager drops the KV pool to about 41K tokens")
    if "--enforce-eager" in extra_args:
        out.append("--enforce-eager turns CUDA graphs off: the champion was measured with them")
    for i, arg in enumerate(extra_args):
        val = extra_args[i + 1] if i + 1 < len(extra_args) else ""
        if arg.startswith("--kv-cache-dtype"):
            kv = arg.split("=", 1)[1] if "=" in arg else val
            if kv == "int4_per_token_head":
                out.append(
                    "--kv-cache-dtype int4_per_token_head fails to initialise for Laguna's cache "
                    "shape"
                )
            elif kv.startswith("turboquant"):
                out.append(f"--kv-cache-dtype {kv} is an experiment, never a serving mode")
    return out


def _getter(d):
    return d.get if isinstance(d, dict) else lambda k, default=None: getattr(d, k, default)


def cards_of(get) -> str:
    """Each replica's own cards, first as the recipe lists them (replica 1: 0..gpu_count-1)."""
    return get("cuda_visible_devices") or ",".join(str(i) for i in range(int(get("gpu_count"))))


def profile_of(d) -> dict:
    """The serving mode's row with `serving_overrides` applied: what the unit, the router's
    maxconn and the deploy's summary all read. `d`: host.data or a dict of the knobs."""
    get = _getter(d)
    profiles = get("serving_profiles")
    mode = get("serving_mode")
    if mode not in profiles:
        raise ProfileError(
            f"serving_mode {mode!r} is not a profile; choose one of {', '.join(profiles)}"
        )
    overrides = dict(get("serving_overrides") or {})
    stray = sorted(set(overrides) - set(PROFILE_FIELDS))
    if stray:
        raise ProfileError(
            f"serving_overrides: {', '.join(stray)} is not a profile value; "
            f"one of {', '.join(PROFILE_FIELDS)}"
        )
    return dict(profiles[mode], **overrides)


def render(d, image_digest: str | None = None) -> Serving:
    """`d`: host.data (or any object/dict with the group_data knobs)."""
    get = _getter(d)
    p = profile_of(d)
    mode = get("serving_mode")
    published = get("serving_profiles")[mode]
    if not isinstance(p.get("gate_prompt_tokens"), int):
        raise ProfileError(f"serving_mode {mode!r}: gate_prompt_tokens must be a number of tokens")
    # Said in the release (status, the summary): the box does not run the recipe's row as published.
    overridden = [
        f"serving_overrides {k}={v!r} (the profile's {published.get(k)!r})"
        for k, v in p.items()
        if published.get(k) != v
    ]
    extra_args = list(get("vllm_extra_args") or [])
    network_env = get("container_network_env") or {}
    env = {
        "CUDA_VISIBLE_DEVICES": cards_of(get),
        # CUDA numbers the cards as nvidia-smi does (its default puts the fastest first), so a
        # replica's cards are the ones whose device nodes its container is given.
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        **get("container_env"),
        **network_env,
        **(get("container_extra_env") or {}),
    }
    unsafe = _unsafe(d, p, extra_args, env)
    warnings = []
    if unsafe and not get("force_unsafe"):
        raise ProfileError(
            f"refusing serving_mode {mode!r}: "
            + "; ".join(unsafe)
            + ". Set force_unsafe = true in the hosts file (or --data force_unsafe=true) to run "
            "it anyway."
        )
    if unsafe:
        warnings = [f"forced: {u}" for u in unsafe]

    docker_args = _docker_args(get, env, image_digest)
    vllm, speculative = _vllm_args(get, p)
    vllm += ["--served-model-name", get("served_model_name"), *extra_args]
    bad = [a for a in [*docker_args, *vllm] if any(ord(c) < 0x20 or ord(c) == 0x7F for c in str(a))]
    if bad:  # a newline would end ExecStart= and start a directive of its own
        raise ProfileError(
            f"refusing serving_mode {mode!r}: control characters in {bad[0]!r} "
            "(vllm_extra_args, container_extra_env or a profile value)"
        )
    image = get("vllm_image")
    if image_digest:
        image = f"{images.repository(image)}@{image_digest}"
    return Serving(
        mode,
        image,
        docker_args,
        vllm,
        p["gate_prompt_tokens"],
        p.get("max_model_len"),
        speculative,
        list(p.get("derived", []))
        + overridden
        + ([f"{', '.join(network_env)} on loopback (not in the recipe)"] if network_env else []),
        warnings,
    )


# The profile's values that are vLLM flags of their own name, in the recipe's order.
LIMITS = ("max_model_len", "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens")


def _docker_args(get, env: dict, digest: str | None) -> list[str]:
    """`docker run`'s arguments before the image: the recipe's, then the environment, then the
    caches the kit adds (the checkpoint's code, vLLM's compile cache)."""
    args = [
        "--rm",
        "--name",
        get("container_name"),
        "--gpus",
        "all",
        "--ipc=host",
        f"--shm-size={get('shm_size')}",
        "--network",
        "host",
        "--log-driver",
        "none",
        "-v",
        f"{get('model_dir')}:{CONTAINER_CACHE}:ro",
    ]
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    return args + [
        "-e",
        f"HF_MODULES_CACHE={MODULES_CACHE}",
        "-v",
        f"{compile_cache(get, digest)}:{CONTAINER_COMPILE_CACHE}",
    ]


def _vllm_args(get, p: dict) -> tuple[list[str], dict | None]:
    """vLLM's arguments up to the served name, and the DFlash speculative config (or None)."""
    target = f"{CONTAINER_CACHE}/{get('target_repo').split('/')[-1]}"
    vllm = [
        target,
        "--host",
        get("api_bind"),
        "--port",
        str(get("api_port")),
        *tensor_parallel(get("vllm_common_args"), int(get("gpu_count"))),
    ]
    for key in (
        "max_model_len",
        "gpu_memory_utilization",
        "max_num_seqs",
        "max_num_batched_tokens",
    ):
        if p.get(key) is not None:
            vllm += [f"--{key.replace('_', '-')}", str(p[key])]
    speculative = None
    if p.get("dflash_tokens"):
        drafter = f"{CONTAINER_CACHE}/{get('drafter_repo').split('/')[-1]}"
        speculative = {
            "model": drafter,
            "num_speculative_tokens": p["dflash_tokens"],
            "method": "dflash",
        }
        vllm += ["--speculative-config", json.dumps(speculative)]
    return vllm, speculative


def tensor_parallel(common: list, gpu_count: int) -> list[str]:
    """The common flags with `--tensor-parallel-size <gpu_count>` where the recipe has it: right
    after --trust-remote-code (so a four-card box's unit is the one it always was)."""
    args = [str(a) for a in common]
    at = 1 if args[:1] == ["--trust-remote-code"] else 0
    return [*args[:at], "--tensor-parallel-size", str(gpu_count), *args[at:]]


def systemd_quote(arg: str) -> str:
    """One argument for ExecStart=: quoted when needed, with systemd's % and $ specifiers
    escaped."""
    escaped = arg.replace("%", "%%").replace("$", "$$")
    if escaped and all(c.isalnum() or c in "-_./:=,@+" for c in escaped):
        return escaped
    return "'" + escaped.replace("\\", "\\\\").replace("'", "\\'") + "'"


def wrap(words: list[str], width: int = 96) -> str:
    """ExecStart= words on continuation lines, a flag kept with its value."""
    lines, line = [], ""
    for w in words:
        if (
            line
            and len(line) + 1 + len(w) > width
            and not (w[:1] != "-" and line.split()[-1].startswith("-"))
        ):
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    return " \\\n    ".join(lines + [line])


def render_release(knobs: dict, digest: str | None) -> tuple[dict, str]:
    """(release.json spec, unit text with @RELEASE@ for the number) for the knobs' serving mode."""
    serving = render(knobs, digest)
    # docker starts through the box tool that names the replica's GPU device nodes to it
    # (boxtools/gpudevices.py: a systemctl daemon-reload then keeps the container's GPUs).
    devices = [
        "/usr/bin/python3",
        f"{knobs['kit_dir']}/bin/laguna_gpu_devices.py",
        "--cards",
        cards_of(_getter(knobs)),
        "--",
    ]
    exec_start = wrap(
        [systemd_quote(a) for a in [*devices, "/usr/bin/docker", *serving.argv()[1:]]]
    )
    template = jinja2.Template(
        (KIT_ROOT / "files/laguna-vllm.service.j2").read_text(),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    unit = template.render(
        release="@RELEASE@",
        mode=serving.mode,
        served_name=knobs["served_model_name"],
        container_name=knobs["container_name"],
        exec_start=exec_start,
        start_limit_interval_s=knobs["start_limit_interval_s"],
        start_limit_burst=knobs["start_limit_burst"],
        ready_timeout_s=knobs["ready_timeout_s"],
    )
    spec = {
        "mode": serving.mode,
        "image": knobs["vllm_image"],
        "image_digest": digest,
        "target_repo": knobs["target_repo"],
        "target_revision": knobs["target_revision"],
        "drafter_repo": knobs["drafter_repo"],
        "drafter_revision": knobs["drafter_revision"],
        "argv": serving.argv(),
        "compile_cache": compile_cache(_getter(knobs), digest),
        "derived": serving.derived,
        "forced": serving.warnings,
        # The checkpoint revisions this release runs: activating it (a rollback) puts them back.
        "checkpoints": [
            {"dest": f"{knobs['model_dir']}/{repo.split('/')[-1]}", "revision": rev}
            for repo, rev in checkpoint_pairs(knobs)
            if is_pinned(rev)
        ],
        # The gate this release must pass, kept with it so a rollback validates the restored mode.
        "gate": {
            "url": f"http://127.0.0.1:{knobs['api_port']}/v1",
            "model": knobs["served_model_name"],
            "prompt_tokens": serving.gate_prompt_tokens,
            "max_tokens": knobs["gate_max_tokens"],
            "timeout": knobs["gate_timeout_s"],
            "ready_timeout": knobs["ready_timeout_s"],
            "dflash": bool(serving.speculative),
            "min_acceptance": knobs["dflash_min_acceptance"],
            "bench_tokens": knobs["gate_bench_tokens"],
            "min_decode_ratio": knobs["min_decode_ratio"],
        },
        "unit_sha256": hashlib.sha256(unit.encode()).hexdigest(),
    }
    return spec, unit
