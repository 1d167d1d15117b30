"""laguna_kit/run/status_table.py: the fleet's status as one table, a row per box and replica,
with the router's view of each when the router was in the run."""

from laguna_kit.run import status_table

RELEASES = {
    "current": {"number": 3, "spec": {"mode": "champion"}},
    "gate": {"passed": True, "release": 3, "time": "2026-12-07T18:00:00+0000"},
    "perf": {"decode_tok_s": 279.31},
}
STATUS = {"unit": "active", "health": "200", "gpu_mem": "20100, 24576, 41;20100, 24576, 57;"}


def test_a_row_per_box_and_replica_with_the_routers_view():
    rows = {
        ("gpu-1", 1): status_table.row(
            "gpu-1", 1, STATUS, RELEASES, {"decode_tok_s": 282.5}, 122880
        ),
        ("gpu-8", 2): status_table.row(
            "gpu-8",
            2,
            {"health": ""},
            {"gate": {"passed": False}, "drain": {"by": "operator"}},
            {},
            None,
        ),
    }
    text = status_table.lines(rows, {"gpu-1": "UP"})
    assert text[0] == "--> Fleet status:"
    head, one, two = text[1], text[2], text[3]
    assert head.split()[:4] == ["host", "replica", "release", "mode"]
    assert one.split() == [
        "gpu-1", "1", "3", "champion", "200", "UP", "passed", "2026-12-07T18:00:00+0000",
        "279.3", "(282.5)", "57", "120", "GiB",
    ]  # fmt: skip
    assert two.split()[:7] == ["gpu-8", "2", "-", "-", "no", "answer", "DRAIN"]
    assert "FAILED" in two
    # the router's view wins over the box's own word
    assert "DOWN" in status_table.lines(rows, {"gpu-8-r2": "DOWN"})[3]


def test_the_hottest_card_or_a_dash():
    assert status_table.hottest("1, 2, 41;1, 2, 63;") == "63"
    assert status_table.hottest("") == "-" and status_table.hottest("1, 2;") == "-"
