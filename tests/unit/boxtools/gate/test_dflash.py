"""laguna_kit/boxtools/gate/dflash.py: acceptance between two scrapes of vLLM's counters."""

import pytest

from laguna_kit.boxtools.gate.dflash import SPEC_RE, dflash_check, spec_counters
from laguna_kit.boxtools.gate.failure import GateFailure


def test_gate_counts_dflash_acceptance_between_two_scrapes():
    before = {"drafts": 1, "draft_tokens": 70, "accepted_tokens": 40}
    after = {"drafts": 11, "draft_tokens": 140, "accepted_tokens": 82}
    assert dflash_check(before, after, 0.2) == {
        "draft_tokens": 70,
        "accepted_tokens": 42,
        "acceptance": 0.6,
    }
    with pytest.raises(GateFailure, match="below 70%"):
        dflash_check(before, after, 0.7)
    line = 'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="laguna"} 42.0'
    assert SPEC_RE.match(line).groups() == ("accepted_tokens", "42.0")


def test_no_draft_token_is_speculative_decoding_not_running():
    same = {"drafts": 1, "draft_tokens": 70, "accepted_tokens": 40}
    with pytest.raises(GateFailure, match="DFlash proposed no draft tokens"):
        dflash_check(same, same, 0.2)


def test_the_counters_are_read_from_the_servers_metrics(url):
    got = spec_counters(url)
    assert set(got) == {"drafts", "draft_tokens", "accepted_tokens"}
    assert all(isinstance(v, float) for v in got.values())
