"""laguna_kit/boxtools/cachewarm.py: the blobs of the image's linux/amd64 manifest, asked of a
registry on loopback that answers as the distribution registry does, and where its store keeps
them."""

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from laguna_kit.boxtools import cachewarm

LAYER = "sha256:" + hashlib.sha256(b"layer").hexdigest()
CONFIG = "sha256:" + hashlib.sha256(b"config").hexdigest()
AMD64 = "sha256:" + "a" * 64
INDEX = {
    "manifests": [
        {"digest": "sha256:" + "b" * 64, "platform": {"os": "linux", "architecture": "arm64"}},
        {"digest": AMD64, "platform": {"os": "linux", "architecture": "amd64"}},
    ]
}
IMAGE = {"config": {"digest": CONFIG, "size": 6}, "layers": [{"digest": LAYER, "size": 5}]}


class Registry(BaseHTTPRequestHandler):
    def do_GET(self):
        docs = {"/v2/vllm/x/manifests/v1": INDEX, f"/v2/vllm/x/manifests/{AMD64}": IMAGE}
        doc = docs.get(self.path)
        body = json.dumps(doc).encode() if doc else b"{}"
        self.send_response(200 if doc else 404)
        self.send_header("Docker-Content-Digest", "sha256:" + "c" * 64)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture(scope="module")
def registry():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield cachewarm.Registry(f"http://127.0.0.1:{server.server_address[1]}", 5)
    server.shutdown()


def test_the_amd64_images_config_and_layers_are_the_blobs(registry):
    digest, blobs = cachewarm.manifest_blobs(registry, "vllm/x", "v1")
    assert digest == "sha256:" + "c" * 64 and blobs == [(CONFIG, 6), (LAYER, 5)]
    with pytest.raises(cachewarm.WarmError, match="HTTP 404"):
        cachewarm.manifest_blobs(registry, "vllm/x", "v2")


def test_a_blob_is_stored_when_the_store_holds_all_its_bytes(tmp_path):
    path = cachewarm.blob_path(str(tmp_path), LAYER)
    assert path.endswith(f"/blobs/sha256/{LAYER[7:9]}/{LAYER[7:]}/data")
    assert not cachewarm.stored(str(tmp_path), LAYER, 5)
    import os

    os.makedirs(os.path.dirname(path))
    open(path, "wb").write(b"lay")
    assert not cachewarm.stored(str(tmp_path), LAYER, 5)  # the store's copy still arriving
    open(path, "wb").write(b"layer")
    assert cachewarm.stored(str(tmp_path), LAYER, 5)
    with pytest.raises(cachewarm.WarmError, match="http://host:port"):
        cachewarm.Registry("https://cache:5000", 5)
