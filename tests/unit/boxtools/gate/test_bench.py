"""laguna_kit/boxtools/gate/bench.py: the recipe's benchmark shape against the stand-in vLLM."""

from laguna_kit.boxtools.gate.bench import benchmark, decode_figure


def test_the_benchmark_rows_and_the_decode_figure(url):
    rows = benchmark(url, "laguna", max_tokens=20, runs=2, timeout=60)
    assert [r["run"] for r in rows] == [1, 2]
    assert all(r["output_tokens"] > 0 and r["tok_s"] and r["ttft_s"] for r in rows), rows
    fig = decode_figure(url, "laguna", 20, timeout=60)
    assert set(fig) == {"output_tokens", "wall_s", "decode_tok_s", "short_ttft_s"}
    assert fig["decode_tok_s"] > 0
