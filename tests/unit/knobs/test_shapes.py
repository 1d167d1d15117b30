"""laguna_kit/knobs/shapes.py: what each shape lets through and what it refuses, saying why."""

from laguna_kit.knobs import shapes


def test_paths_urls_and_text_let_nothing_through_that_would_change_a_files_meaning():
    path = shapes.box_path()
    assert path("/opt/laguna-kit") is None
    assert path("/opt/laguna kit") and path("/opt/../etc") and path("relative") and path("/x/")
    url = shapes.url()
    assert url("https://pkgs.tailscale.com/stable") is None and url("http://[fd7a::1]:5000") is None
    assert url("https://x/y?q=1") and url("ftp://x") and shapes.url(empty_ok=True)("") is None
    assert shapes.NO_CONTROL("two words") is None and shapes.NO_CONTROL("a\nb")
    assert shapes.NO_CONTROL("x" * 5000) == "is 5000 characters long (at most 4096)"


def test_numbers_flags_lists_and_tables():
    assert shapes.PORT(8080) is None and shapes.PORT(True) and shapes.PORT("8080")
    assert shapes.number(0, 1)(0.5) is None and shapes.number(0, 1)(2)
    assert shapes.flag()(False) is None and shapes.flag()("false")
    assert shapes.OPEN_PORTS(["tcp/9100"]) is None
    assert shapes.OPEN_PORTS(["9100"]) == "item 0 ('9100') is not tcp/PORT or udp/PORT"
    assert shapes.mapping(shapes.ENV_NAME, shapes.NO_CONTROL)({"1X": "v"}) == (
        "key '1X' is not an environment variable name"
    )


def test_what_the_kit_sets_itself_is_refused_from_the_owner():
    assert shapes.OWNER_ENV({"A": "1"}) is None
    assert "sets CUDA_VISIBLE_DEVICES" in shapes.OWNER_ENV({"CUDA_VISIBLE_DEVICES": "0"})
    assert "sets -tp" in shapes.OWNER_ARGS(["-tp", "8"])
    assert shapes.overrides()({"max_num_seqs": 8}) is None
    assert "not a profile value" in shapes.overrides()({"tensor_parallel_size": 8})
    assert shapes.json_like()({"a": [1, {"b": None}]}) is None
    assert shapes.json_like()({"a": object()}) == "holds a object"
