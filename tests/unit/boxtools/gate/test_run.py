"""laguna_kit/boxtools/gate/run.py: the whole gate as one result against the stand-in vLLM; a
failing check is the result's error, never an exception."""

from types import SimpleNamespace

from laguna_kit.boxtools.gate.run import run_gate


def gate_args(url, **kw):
    args = dict(
        release=3, url=url, unit=None, ready_timeout=10, model="laguna", prompt_tokens=2000,
        max_tokens=8, timeout=60, bench_tokens=16, dflash=True, min_acceptance=0.0,
        min_decode_ratio=0.8, baseline=None, force_slower=False, mode="champion",
    )  # fmt: skip
    return SimpleNamespace(**dict(args, **kw))


def test_every_check_passes_and_the_figures_are_kept(url):
    result = run_gate(gate_args(url))
    assert result["passed"], result
    assert result["release"] == 3 and result["url"] == url
    assert result["perf"]["mode"] == "champion" and result["perf"]["decode_tok_s"] > 0
    assert "acceptance" in result["dflash"]


def test_a_slower_release_is_a_failed_result_naming_its_baseline(url):
    baseline = {"release": 2, "decode_tok_s": 1e9, "mode": "champion"}
    result = run_gate(gate_args(url, baseline=baseline))
    assert not result["passed"] and "of release 2" in result["error"]
    assert result["baseline"] == baseline
    unreachable = run_gate(gate_args("http://127.0.0.1:9/v1", ready_timeout=1))
    assert not unreachable["passed"] and "not ready after 1 s" in unreachable["error"]
