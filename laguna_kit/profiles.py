"""One serving mode (a row of group_data's serving_profiles) turned into the container's command line.

Everything the unit, the dry-run printout and the docs show comes from `render()`, so they cannot
disagree. Values the recipe saw crash are refused here unless `force_unsafe` is set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

CONTAINER_CACHE = "/root/.cache/huggingface"  # where the recipe mounts the model cache


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
        out.append(f"gpu_memory_utilization {gmu} with DFlash: the first-generation DFlash buffer OOMed at 0.90 "
                   "(keep <= 0.87 without a full long-context gate)")
    if env.get("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS") == "0":
        out.append("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 disables the CUDA-graph memory estimate: both "
                   "recipe tries crashed later")
    if "--disable-hybrid-kv-cache-manager" in extra_args:
        out.append("--disable-hybrid-kv-cache-manager drops the KV pool to about 41K tokens")
    if "--enforce-eager" in extra_args:
        out.append("--enforce-eager turns CUDA graphs off: the champion was measured with them")
    for i, arg in enumerate(extra_args):
        val = extra_args[i + 1] if i + 1 < len(extra_args) else ""
        if arg.startswith("--kv-cache-dtype"):
            kv = arg.split("=", 1)[1] if "=" in arg else val
            if kv == "int4_per_token_head":
                out.append("--kv-cache-dtype int4_per_token_head fails to initialise for Laguna's cache shape")
            elif kv.startswith("turboquant"):
                out.append(f"--kv-cache-dtype {kv} is an experiment, never a serving mode")
    return out


def render(d, image_digest: str | None = None) -> Serving:
    """`d`: host.data (or any object/dict with the group_data knobs)."""
    get = d.get if isinstance(d, dict) else lambda k, default=None: getattr(d, k, default)
    profiles = get("serving_profiles")
    mode = get("serving_mode")
    if mode not in profiles:
        raise ProfileError(f"serving_mode {mode!r} is not a profile; choose one of {', '.join(profiles)}")
    p = profiles[mode]
    extra_args = list(get("vllm_extra_args") or [])
    env = dict(get("container_env"), **(get("container_extra_env") or {}))
    unsafe = _unsafe(d, p, extra_args, env)
    warnings = []
    if unsafe and not get("force_unsafe"):
        raise ProfileError(f"refusing serving_mode {mode!r}: " + "; ".join(unsafe)
                           + ". Set force_unsafe=True to run it anyway.")
    if unsafe:
        warnings = [f"forced: {u}" for u in unsafe]

    target = f"{CONTAINER_CACHE}/{get('target_repo').split('/')[-1]}"
    drafter = f"{CONTAINER_CACHE}/{get('drafter_repo').split('/')[-1]}"
    docker_args = ["--rm", "--name", get("container_name"), "--gpus", "all", "--ipc=host",
                   f"--shm-size={get('shm_size')}", "--network", "host", "--log-driver", "none",
                   "-v", f"{get('model_dir')}:{CONTAINER_CACHE}:ro"]
    for key, value in env.items():
        docker_args += ["-e", f"{key}={value}"]
    vllm = [target, "--host", get("api_bind"), "--port", str(get("api_port")), *get("vllm_common_args")]
    if p.get("max_model_len") is not None:
        vllm += ["--max-model-len", str(p["max_model_len"])]
    if p.get("gpu_memory_utilization") is not None:
        vllm += ["--gpu-memory-utilization", str(p["gpu_memory_utilization"])]
    if p.get("max_num_seqs") is not None:
        vllm += ["--max-num-seqs", str(p["max_num_seqs"])]
    if p.get("max_num_batched_tokens") is not None:
        vllm += ["--max-num-batched-tokens", str(p["max_num_batched_tokens"])]
    speculative = None
    if p.get("dflash_tokens"):
        speculative = {"model": drafter, "num_speculative_tokens": p["dflash_tokens"], "method": "dflash"}
        vllm += ["--speculative-config", json.dumps(speculative)]
    vllm += ["--served-model-name", get("served_model_name"), *extra_args]
    image = get("vllm_image")
    if image_digest:
        image = f"{image.rsplit(':', 1)[0]}@{image_digest}"
    return Serving(mode, image, docker_args, vllm, p["gate_prompt_tokens"], p.get("max_model_len"), speculative,
                   list(p.get("derived", [])), warnings)


def systemd_quote(arg: str) -> str:
    """One argument for ExecStart=: quoted when needed, with systemd's % and $ specifiers escaped."""
    escaped = arg.replace("%", "%%").replace("$", "$$")
    if escaped and all(c.isalnum() or c in "-_./:=,@+" for c in escaped):
        return escaped
    return "'" + escaped.replace("\\", "\\\\").replace("'", "\\'") + "'"
