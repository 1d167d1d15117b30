"""laguna_kit/domain/images.py: the image's CUDA requirement read from a registry (a local one here,
answering as Docker Hub does: a Bearer challenge, an index, a manifest, a config blob)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from laguna_kit.domain import images

REQUIRE = "cuda>=13.0 brand=tesla,driver>=535,driver<536 brand=unknown,driver>=535,driver<536"
CONFIG = {
    "config": {"Env": ["PATH=/usr/bin", "CUDA_VERSION=13.0.1", f"NVIDIA_REQUIRE_CUDA={REQUIRE}"]}
}


class Registry(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def send(self, code, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        port = self.server.server_address[1]
        if self.path.startswith("/token"):
            return self.send(200, {"token": "t0k"})
        if self.headers.get("Authorization") != "Bearer t0k":
            challenge = (
                f'Bearer realm="http://127.0.0.1:{port}/token",service="registry.test",'
                'scope="repository:vllm/vllm-openai:pull"'
            )
            return self.send(401, {"errors": []}, [("WWW-Authenticate", challenge)])
        base = "/v2/vllm/vllm-openai"
        if self.path == f"{base}/manifests/v0.25.1":
            return self.send(
                200,
                {
                    "manifests": [
                        {
                            "digest": "sha256:arm",
                            "platform": {"os": "linux", "architecture": "arm64"},
                        },
                        {
                            "digest": "sha256:amd",
                            "platform": {"os": "linux", "architecture": "amd64"},
                        },
                    ]
                },
            )
        if self.path == f"{base}/manifests/sha256:amd":
            return self.send(200, {"config": {"digest": "sha256:cfg"}})
        if self.path == f"{base}/blobs/sha256:cfg":
            return self.send(200, CONFIG)
        self.send(404, {"errors": [{"code": "MANIFEST_UNKNOWN"}]})


@pytest.fixture
def registry():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_requirement_read_through_a_bearer_challenge_and_an_index(registry):
    need = images.image_requirement(registry, "vllm/vllm-openai:v0.25.1")
    assert need.cuda_version == "13.0.1" and need.require == REQUIRE
    assert need.minimum == (13, 0) and need.describe() == "CUDA >= 13.0 (cuda>=13.0)"
    assert need.met_by("13.0") and need.met_by("13.1") and not need.met_by("12.2")


def test_an_unknown_tag_and_an_unreachable_registry_are_one_line(registry):
    with pytest.raises(
        images.ImageError, match="answered HTTP 404 for vllm/vllm-openai/manifests/v9"
    ):
        images.image_requirement(registry, "vllm/vllm-openai:v9")
    said = images.requirement_or_reason("http://127.0.0.1:9", "vllm/vllm-openai:v0.25.1")[1]
    assert said.startswith("cannot read vllm/vllm-openai:v0.25.1 from http://127.0.0.1:9: ")
    # Not the exception's type name alone: the URL asked, the reason, and what to check.
    assert "http://127.0.0.1:9/v2/vllm/vllm-openai/manifests/v0.25.1" in said
    assert "Connection refused" in said and "image_registry" in said


def test_a_cuda_13_2_base_would_need_13_2():
    need = images.from_env({"CUDA_VERSION": "13.2.0", "NVIDIA_REQUIRE_CUDA": "cuda>=13.2"})
    assert not need.met_by("13.0") and need.met_by("13.2")
    assert images.from_env(["CUDA_VERSION=13.0.1"]).minimum == (13, 0)  # no NVIDIA_REQUIRE_CUDA


def test_references_by_tag_by_digest_and_both():
    digest = "sha256:" + "ab" * 32
    assert images.parse_ref("vllm/vllm-openai:v0.25.1") == ("vllm/vllm-openai", "v0.25.1", "")
    assert images.parse_ref(f"vllm/vllm-openai@{digest}") == ("vllm/vllm-openai", "", digest)
    assert images.parse_ref(f"r.io:5000/v/o:t@{digest}") == ("r.io:5000/v/o", "t", digest)
    assert images.split_ref(f"ubuntu@{digest}") == ("library/ubuntu", digest)
    assert images.split_ref("r.io:5000/x") == ("r.io:5000/x", "latest")
    assert images.repository(f"vllm/vllm-openai:v1@{digest}") == "vllm/vllm-openai"


def test_no_expected_digest_no_pull():
    """Issue 37 #4: the registry unread and the tag pinning nothing is refused, naming the fix;
    a reference pinned by digest needs no registry read."""
    why = images.unpinnable_problem("vllm/vllm-openai:v0.25.1", "https://r", "cannot read it")
    assert why and 'vllm_image = "vllm/vllm-openai@sha256:' in why
    pinned = "vllm/vllm-openai@sha256:" + "0" * 64
    assert images.unpinnable_problem(pinned, "https://r", "cannot read it") is None
    assert images.unpinnable_problem("vllm/vllm-openai:v0.25.1", "https://r", "") is None


def test_the_image_knob_takes_a_digest():
    from laguna_kit.knobs.shapes import IMAGE

    digest = "sha256:" + "ab" * 32
    for good in ("vllm/vllm-openai:v0.25.1", f"vllm/vllm-openai@{digest}", f"a/b:c@{digest}"):
        assert IMAGE(good) is None, good
    for bad in ("vllm/vllm-openai", "a/b@sha256:xyz", f"a/b@{digest};x", "a/b:c@md5:00"):
        assert IMAGE(bad), bad
