"""laguna_kit/domain/profiles.py: the profile table's refusals and the unit it renders."""

import json
import re
import shlex
from pathlib import Path

import pytest

from laguna_kit.domain import profiles
from laguna_kit.knobs import declared

SEED = Path(__file__).resolve().parents[2] / "data" / "champion-facts.md"


def knobs(**over):
    return dict(declared.defaults(), **over)


@pytest.mark.parametrize(
    "over, message",
    [
        ({"serving_mode": "turbo"}, "serving_mode 'turbo' is not a profile"),
        (
            {"container_extra_env": {"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0"}},
            "CUDA-graph memory estimate",
        ),
        ({"vllm_extra_args": ["--disable-hybrid-kv-cache-manager"]}, "about 41K tokens"),
        ({"vllm_extra_args": ["--enforce-eager"]}, "turns CUDA graphs off"),
        ({"vllm_extra_args": ["--kv-cache-dtype", "int4_per_token_head"]}, "fails to initialise"),
        (
            {"vllm_extra_args": ["--kv-cache-dtype=turboquant_k8v4"]},
            "an experiment, never a serving mode",
        ),
        ({"vllm_extra_args": ["--max-loras\nExecStartPre=/bin/sh"]}, "control characters in"),
        ({"container_extra_env": {"X": "a\rb"}}, "control characters in"),
    ],
)
def test_what_the_recipe_saw_crash_is_refused(over, message):
    with pytest.raises(profiles.ProfileError, match=message):
        profiles.render(knobs(**over))


def test_dflash_at_gmu_090_is_refused_unless_forced():
    table = declared.defaults()["serving_profiles"]
    hot = dict(table, champion=dict(table["champion"], gpu_memory_utilization=0.90))
    with pytest.raises(profiles.ProfileError, match="OOMed at 0.90"):
        profiles.render(knobs(serving_profiles=hot))
    assert profiles.render(knobs(serving_profiles=hot, force_unsafe=True)).warnings


def test_the_modes_differ_only_where_the_recipe_says():
    champion = profiles.render(knobs()).vllm_args
    first = profiles.render(knobs(serving_mode="context-first")).vllm_args
    assert "--speculative-config" in champion and "--speculative-config" not in first
    assert (
        "--max-model-len" not in first
        and champion[champion.index("--max-model-len") + 1] == "204800"
    )


def test_release_spec_carries_its_gate_and_both_revisions():
    spec, unit = profiles.render_release(knobs(), "sha256:" + "0" * 64)
    assert spec["gate"]["prompt_tokens"] == 190000 and spec["gate"]["dflash"] is True
    assert [c["dest"] for c in spec["checkpoints"]] == [
        "/models/Laguna-S-2.1-INT4",
        "/models/Laguna-S-2.1-DFlash-INT4",
    ]
    assert "@RELEASE@" in unit and "\\\n    " in unit


def exec_start(unit_text: str) -> list[str]:
    body = unit_text.split("ExecStart=", 1)[1].split("\nExecStop=", 1)[0].replace("\\\n", " ")
    return shlex.split(body.replace("%%", "%").replace("$$", "$"))


def seed_champion_flags() -> list[str]:
    """Every `--flag value` the seed lists for the champion container and vLLM arguments."""
    text = SEED.read_text()
    section = text.split("## The container the recipe runs", 1)[1].split("## Other modes", 1)[0]
    return re.findall(r"`(--[a-z0-9-]+(?:[ =][^`]*)?|[A-Z_]+=[^`]+)`", section)


def test_rendered_unit_matches_every_seed_fact():
    spec, unit = profiles.render_release(declared.defaults(), "sha256:" + "0" * 64)
    argv = exec_start(unit)
    joined = " ".join(argv)
    flags = seed_champion_flags()
    assert len(flags) >= 20, flags
    for flag in flags:
        if flag.startswith("--speculative-config"):
            cfg = json.loads(argv[argv.index("--speculative-config") + 1])
            assert cfg == {
                "model": "/root/.cache/huggingface/Laguna-S-2.1-DFlash-INT4",
                "num_speculative_tokens": 7,
                "method": "dflash",
            }
        elif flag.startswith("--default-chat-template-kwargs"):
            assert json.loads(argv[argv.index("--default-chat-template-kwargs") + 1]) == {
                "enable_thinking": True
            }
        elif flag.startswith(("--host 0.0.0.0 --port 8000", "-p ")):
            # upstream's published port: replaced by host networking on 8080 (docs/reference.md)
            continue
        elif flag == "--kv-cache-dtype":
            continue  # the seed's "No --kv-cache-dtype", asserted below
        elif flag.startswith("--") or "=" in flag:
            assert flag in joined, f"seed fact {flag!r} missing from the unit"
    assert (
        "vllm/vllm-openai@sha256:" in joined
        and "/root/.cache/huggingface/Laguna-S-2.1-INT4" in argv
    )
    assert "/models:/root/.cache/huggingface:ro" in argv and "--served-model-name laguna" in joined
    assert "--kv-cache-dtype" not in joined and "--restart" not in joined and " -p " not in joined
    assert "--port 8080" in joined and "--network host" in joined
    assert re.search(r"^Restart=always$", unit, re.M) and re.search(
        r"^StartLimitBurst=3$", unit, re.M
    )
    assert "ExecStartPre=-/usr/bin/docker rm -f vllm-laguna" in unit


def test_the_container_writes_the_checkpoints_code_and_keeps_its_compile_cache_outside_the_model():
    """Issue 38 #3, #4: the model folder stays read-only; transformers' modules cache (created
    whenever the checkpoint's code loads) is in the container's writable layer; vLLM's compile
    cache is a host folder per replica and image, so a restart or a rollback loads it."""
    from laguna_kit.domain.profiles import render_release
    from laguna_kit.knobs.declared import defaults

    digest = "sha256:" + "ab" * 32
    spec, _ = render_release(defaults(), digest)
    argv = spec["argv"]
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "-v"]
    env = [argv[i + 1] for i, a in enumerate(argv) if a == "-e"]
    assert "/models:/root/.cache/huggingface:ro" in mounts
    assert "HF_MODULES_CACHE=/tmp/hf_modules" in env
    cache = "/var/cache/laguna-kit/vllm-compile/vllm-laguna/" + "ab" * 8
    assert f"{cache}:/root/.cache/vllm" in mounts and spec["compile_cache"] == cache
    other, _ = render_release(defaults(), "sha256:" + "cd" * 32)
    assert other["compile_cache"] != cache  # another image, another cache
