"""tasks/preflight.py: wrong hardware is refused with the reason, and nothing on the box changes."""

import pytest

from tests.harness import box as boxmod

SNAPSHOT = (
    "dpkg-query -W -f='${Package} ${Version} ${Status}\\n' | sort | sha256sum; "
    "find /etc -xdev -newer /run/laguna-snapshot 2>/dev/null | sort; "
    "ls -la /etc/apt/sources.list.d /etc/docker 2>&1 | sha256sum"
)


def snapshot(b):
    b.run("touch /run/laguna-snapshot; sleep 1")
    return b.run(SNAPSHOT).stdout


@pytest.mark.parametrize(
    "gpus, found",
    [
        (
            boxmod.gpus(boxmod.RTX_3090, 3),
            "found 3× NVIDIA GeForce RTX 3090 (24576 MiB), need 4 GPUs ≥ 24000 MiB each",
        ),
        (
            boxmod.gpus(boxmod.RTX_4080, 4),
            "found 4× NVIDIA GeForce RTX 4080 (16376 MiB), need 4 GPUs ≥ 24000 MiB each",
        ),
        (
            boxmod.gpus(boxmod.H200, 1),
            "found 1× NVIDIA H200 (143771 MiB), need 4 GPUs ≥ 24000 MiB each",
        ),
    ],
    ids=["3-gpus", "16gb-cards", "one-h200"],
)
def test_wrong_hardware_is_refused_before_any_change(make_box, deploy, gpus, found):
    b = make_box(gpus=gpus)
    before = snapshot(b)
    res = deploy(b)
    assert not res.ok
    assert f"pre-flight refused {b.name}: {found}" in res.output, res.explain()
    assert "Nothing on the box was changed." in res.output
    assert res.changed() == []
    assert snapshot(b).splitlines()[0] == before.splitlines()[0], "package list changed"
    assert b.run(SNAPSHOT).stdout == before, "files under /etc or apt/docker config changed"


def test_not_enough_disk_is_refused_with_numbers(make_box, deploy):
    b = make_box()
    res = deploy(b, data={"checkpoint_free_margin_gib": 10_000_000})
    assert not res.ok
    assert "free at /models, need" in res.output and "Nothing on the box was changed." in res.output
    assert res.changed() == []


def test_missing_hub_token_is_refused_without_printing_it(make_box, deploy):
    b = make_box()
    res = deploy(b, env={"HF_TOKEN": ""})
    assert not res.ok
    assert "needs a token with access: set HF_TOKEN" in res.output
    assert res.changed() == []
