"""The gate's tests that speak HTTP share one stand-in vLLM on loopback."""

import pytest

from tests.unit import standin_vllm


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with standin_vllm.serving(tmp_path_factory.mktemp("hf-cache")) as address:
        yield f"http://{address}/v1"
