"""laguna_kit/domain/peer_fetch_plan.py: which box fetches which file from the hub (the others ask
it first), the same answer on every host of the run."""

from laguna_kit.domain import peer_fetch_plan


def test_owners_are_balanced_by_size_and_the_same_on_every_host():
    files = [{"path": f"s{i}", "size": s} for i, s in enumerate([9, 7, 5, 5, 3, 1, 1])]
    a = peer_fetch_plan.owners(files, ["b", "a", "c"])
    assert a == peer_fetch_plan.owners(list(reversed(files)), ["c", "b", "a"])
    load = {}
    for f in files:
        load[a[f["path"]]] = load.get(a[f["path"]], 0) + f["size"]
    assert max(load.values()) - min(load.values()) <= 2, load
    assert peer_fetch_plan.owners(files, ["only"]) == {}


def test_a_refusal_is_read_as_a_file_of_the_checkpoint_and_the_peers_named():
    """Issue 37 #12: the box that gave bad bytes is named in the taker's record; only a file of the
    checkpoint reaches a command."""
    files = {"org/model": {"a.safetensors", "config.json"}}
    records = {
        "gpu-2": [
            {
                "repo": "org/model",
                "started": 7.5,
                "refused_from_peers": [
                    "a.safetensors (from gpu-1, gpu-3)",
                    "../../etc/shadow (from gpu-1)",
                    "config.json; reboot (from gpu-1)",
                    42,
                ],
            },
            {"repo": "org/other", "refused_from_peers": ["a.safetensors (from gpu-1)"]},
            "not a record",
        ],
        "gpu-3": {"not": "a list"},
    }
    got = peer_fetch_plan.refusals(records, files)
    assert [(r["by"], r["from"], r["path"]) for r in got] == [
        ("gpu-2", "gpu-1", "a.safetensors"),
        ("gpu-2", "gpu-3", "a.safetensors"),
    ]
    assert got[0]["id"] == "gpu-2 7.5 org/model a.safetensors"


def test_a_refusal_from_a_box_outside_the_run_is_said(caplog):
    from tests.unit.fixtures import case, operation_output

    op = "checkpoints.peer_refusals_scrubbed"
    doc = case(f"{op}/refused-here-from-a-box-outside-the-run-is-said.json")
    with caplog.at_level("WARNING"):
        operation_output(op, doc)
    assert "from the fleet box gpu-2 failed its hash here; gpu-2 is not in this run" in caplog.text
