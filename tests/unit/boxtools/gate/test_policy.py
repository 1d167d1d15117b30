"""laguna_kit/boxtools/gate/policy.py: a slower release fails its gate naming both figures."""

from laguna_kit.boxtools.gate.policy import slower_check


def test_a_slower_release_fails_naming_both_figures_unless_forced():
    base = {"release": 2, "decode_tok_s": 280.0, "mode": "champion"}
    said = slower_check({"decode_tok_s": 140.1}, base, 0.8, force=False)
    assert "decode 140.1 tok/s is below 0.8 x 280.0 tok/s of release 2" in said
    assert "--data force_slower=true" in said and "min_decode_ratio" in said
    assert slower_check({"decode_tok_s": 140.1}, base, 0.8, force=True) is None
    assert slower_check({"decode_tok_s": 224.0}, base, 0.8, force=False) is None  # = floor
    assert slower_check({"decode_tok_s": 100.0}, None, 0.8, force=False) is None
    assert slower_check({"decode_tok_s": None}, base, 0.8, force=False) is None
