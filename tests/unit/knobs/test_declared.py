"""laguna_kit/knobs/declared.py: group_data/all.py declares each knob once, with its value, its
shape and its why; the defaults are the recipe's values, every one fitting its own shape."""

import ast

from laguna_kit.knobs import declared


def test_every_knob_has_a_value_a_shape_and_a_why_that_fit_together():
    knobs = declared.declared()
    assert len(knobs) > 100
    for name, k in knobs.items():
        assert k.shape(k.value) is None, (name, k.value)
        assert k.why, f"{name} says no why"
    assert knobs["gpu_count"].value == 4 and knobs["gpu_count"].shape(0)
    assert knobs["api_port"].why.startswith("the recipe's public port")


def test_group_data_holds_declarations_only():
    """Every statement of group_data/all.py past its import is `name: shape = value` (pyinfra
    takes each module-level name as a knob)."""
    tree = ast.parse(declared.GROUP_DATA.read_text())
    body = [n for n in tree.body if not isinstance(n, ast.ImportFrom)]
    assert all(isinstance(n, ast.AnnAssign) and n.value is not None for n in body)


def test_the_defaults_are_copies_and_the_per_run_inputs_have_shapes():
    one = declared.defaults()
    one["container_env"]["X"] = "1"
    assert "X" not in declared.defaults()["container_env"]
    assert declared.shape_of("log_lines")(0) and declared.shape_of("nothing") is None
    assert declared.knob_docs()["serving_mode"].startswith("a row of serving_profiles")
