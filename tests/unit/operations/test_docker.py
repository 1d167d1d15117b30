"""The fleet's image cache as the boxes' Docker sees it: first among registry-mirrors, the owner's
mirrors kept, an old cache address of the kit's dropped, dockerd reloaded (not restarted) when the
mirrors are the only change."""

import json

from pyinfra.api import FileUploadCommand

from laguna_kit.operations.docker import kit_mirror

from ..fixtures import HERE, operation_output

CASES = HERE / "operations" / "docker.daemon_config_merged"


def written(case: str) -> dict:
    doc = json.loads((CASES / case).read_text())
    commands, _ = operation_output("docker.daemon_config_merged", doc)
    up = [c for c in commands if isinstance(c, FileUploadCommand)]
    assert len(up) == 1
    return json.loads(up[0].src.getvalue())


def test_the_cache_goes_first_and_the_owners_mirror_stays():
    got = written("the-cache-goes-first-the-owners-mirror-stays-dockerd-reloads.json")
    assert got["registry-mirrors"] == ["http://100.90.9.2:5000", "https://mirror.example.com"]
    assert got["storage-driver"] == "vfs"


def test_without_a_cache_the_kits_mirror_goes_and_nothing_else():
    assert written("no-cache-the-kits-mirror-goes.json") == {"storage-driver": "vfs"}


def test_only_tailnet_addresses_on_the_cache_port_are_the_kits():
    assert kit_mirror("http://100.90.9.2:5000", 5000)
    assert kit_mirror("http://[fd7a:115c:a1e0::9]:5000/", 5000)
    assert not kit_mirror("http://100.90.9.2:5001", 5000)  # another port: the owner's
    assert not kit_mirror("http://192.168.1.5:5000", 5000)  # off the tailnet: the owner's
    assert not kit_mirror("https://100.90.9.2:5000", 5000)  # the kit writes http only
    assert not kit_mirror("http://mirror.example.com:5000", 5000)
