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
