"""The fetch tests that speak HTTP share a stand-in hub serving a three-shard checkpoint."""

import pytest

from .runs import serving_hub


@pytest.fixture(scope="module")
def hub():
    with serving_hub(shards=3) as served:
        yield served
