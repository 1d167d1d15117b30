"""The kit against what vLLM 0.25.1's own code accepts and exports
(tests/harness/standin_vllm/vllm_0_25_1.py, read from the wheel), and the stand-in against both:
every flag of every serving mode is a vLLM option, every vllm: metric the alerts, the dashboard and
the box tools read is one vLLM exports with the suffixes of its type, and the stand-in exports
those with vLLM's types and refuses an option vLLM does not have."""

import re
import subprocess
import sys

import httpx

from laguna_kit import KIT_ROOT
from laguna_kit.domain.profiles import render
from laguna_kit.knobs.declared import defaults
from tests.harness.standin_vllm.vllm_0_25_1 import FLAGS, METRICS
from tests.unit.standin_vllm import STANDIN, serving

SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ()}


def test_every_flag_of_every_serving_mode_is_a_vllm_option():
    knobs = defaults()
    for mode in knobs["serving_profiles"]:
        args = render(dict(knobs, serving_mode=mode, force_unsafe=True)).vllm_args
        flags = {a.split("=", 1)[0] for a in args if a.startswith("-")}
        assert flags and sorted(flags - FLAGS) == [], mode


def metric_of(sample: str) -> tuple[str, str] | None:
    """(vLLM's metric, the suffix used) for a sample name the kit reads."""
    if sample in METRICS:
        return sample, ""
    if sample.endswith("_"):  # a prefix the code completes (vllm:spec_decode_num_<what>)
        return (sample, "") if any(m.startswith(sample) for m in METRICS) else None
    for typ, suffixes in SUFFIXES.items():
        for suffix in suffixes:
            base = sample.removesuffix(suffix)
            if sample.endswith(suffix) and METRICS.get(base) == typ:
                return base, suffix
    return None


def test_every_vllm_metric_the_kit_reads_is_one_vllm_exports_as_that_type():
    texts = [p.read_text() for p in (KIT_ROOT / "files").iterdir() if p.is_file()]
    texts += [p.read_text() for p in (KIT_ROOT / "laguna_kit").rglob("*.py")]
    read = {m for t in texts for m in re.findall(r"vllm:[a-z_]+", t)}
    assert "vllm:request_time_per_output_token_seconds_bucket" in read or (
        "vllm:request_time_per_output_token_seconds_sum" in read
    )
    unknown = sorted(s for s in read if metric_of(s) is None)
    assert unknown == []


def test_the_standin_exports_vllms_types_and_refuses_an_unknown_option(tmp_path):
    with serving(tmp_path) as address:
        text = httpx.get(f"http://{address}/metrics").text
    types = dict(re.findall(r"^# TYPE (vllm:[a-z_]+) (\w+)$", text, re.M))
    assert "vllm:request_time_per_output_token_seconds" in types
    wrong = {
        name: typ
        for name, typ in types.items()
        if METRICS.get(name.removesuffix("_total") if typ == "counter" else name) != typ
    }
    assert wrong == {}
    done = subprocess.run(
        [sys.executable, str(STANDIN), str(tmp_path), "--max-num-seq", "4"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert "vllm serve: error: unrecognized arguments: --max-num-seq" in done.stderr
