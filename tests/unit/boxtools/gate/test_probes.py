"""laguna_kit/boxtools/gate/probes.py against the stand-in vLLM: ready, the smoke test, and a
fresh long prompt whose usage is counted by the server."""

import pytest

from laguna_kit.boxtools.gate import probes
from laguna_kit.boxtools.gate.failure import GateFailure


def test_a_ready_server_passes_the_smoke_test_with_an_answer(url):
    assert probes.wait_ready(url, timeout=10) < 10
    got = probes.smoke(url, "laguna")
    assert got["models"] == ["laguna"] and got["max_model_len"] == 204800 and got["reply"]
    with pytest.raises(GateFailure, match="not 'other'"):
        probes.smoke(url, "other")


def test_the_long_prompt_is_fresh_and_counted_by_the_server(url):
    got = probes.long_context(url, "laguna", 2000, 8, timeout=60)
    assert got["prompt_tokens"] >= 0.95 * 2000 and got["completion_tokens"] >= 1
    assert got["prefill_s"] >= 0 and got["elapsed_s"] >= got["prefill_s"]


def test_a_server_that_never_answers_is_named_with_where_to_look():
    with pytest.raises(GateFailure, match=r"not ready after 1 s \(/health never answered 200\)"):
        probes.wait_ready("http://127.0.0.1:9/v1", timeout=1, every=0.5)
    assert probes.root_of("http://h:8080/v1/") == "http://h:8080"
