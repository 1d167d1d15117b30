"""laguna_kit/knobs/check.py: a value is held to its knob's declared shape; a misspelt knob is
named with the nearest real ones; pyinfra's own data is no misspelt knob."""

from laguna_kit.knobs import check


def test_a_value_is_held_to_its_knobs_shape():
    assert check.problem("api_port", 8080) is None
    assert check.problem("api_port", 70000) == "must be between 1 and 65535"
    assert check.problem("rollback_to", "2; id") == "must be an integer, got str"
    assert check.problem("no_such_knob", "anything") is None  # (refused as unknown elsewhere)


def test_an_unknown_knob_is_named_with_the_nearest_real_ones():
    said = check.unknown_knob("serving_mod", "[data]")
    assert "unknown knob 'serving_mod' in [data] (did you mean serving_mode?)" in said
    assert "serving_overrides = {max_num_seqs" in check.unknown_knob("max_num_seqs")


def test_pyinfras_own_data_and_the_per_run_inputs_are_known():
    for key in ("ssh_config_file", "_sudo", "laguna_roles", "rollback_to", "gpu_count"):
        assert check.known_key(key), key
    assert not check.known_key("gpu_cout")
    assert "ssh_config_file" in check.SSH_FIELDS
