"""boxtools/metricsrelay.py: the monitor's one way to vLLM's /metrics (issue 37 #1): a replica's
/metrics relayed from loopback, nothing else of the API, on real sockets."""

import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from laguna_kit.boxtools import metricsrelay


class FakeVllm(BaseHTTPRequestHandler):
    """What the relay reaches: an API port that serves /metrics and the API itself."""

    def do_GET(self):
        body = b"vllm:num_requests_running 0\n" if self.path == "/metrics" else b'{"data": []}'
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *a):
        pass


def started(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def relay():
    vllm = started(ThreadingHTTPServer(("127.0.0.1", 0), FakeVllm))
    # replica 2's port: nothing listens there
    with ThreadingHTTPServer(("127.0.0.1", 0), FakeVllm) as gone:
        dead = gone.server_address[1]
    server = started(metricsrelay.serve(0, {1: vllm.server_address[1], 2: dead}))
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    vllm.shutdown()


def status(url, method="GET"):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_a_replicas_metrics_page_is_relayed(relay):
    assert status(f"{relay}/metrics/1") == (200, b"vllm:num_requests_running 0\n")
    assert status(f"{relay}/metrics")[0] == 200  # replica 1, as a one-replica box's scrape


@pytest.mark.parametrize(
    "path",
    ["/v1/models", "/v1/chat/completions", "/metrics/3", "/metrics/../v1/models", "/", "/health"],
)
def test_nothing_else_of_the_api_is_reached(relay, path):
    code, body = status(relay + path)
    assert code == 404 and b"data" not in body


def test_no_method_but_get(relay):
    assert status(f"{relay}/metrics/1", method="POST")[0] == 501


def test_a_replica_down_is_a_failed_scrape(relay):
    assert status(f"{relay}/metrics/2")[0] == 502


def test_replica_arguments_are_parsed():
    assert metricsrelay.replica_port("2=8081") == (2, 8081)
    for bad in ("2=", "x=8080", "2=99999", "2=8080;id"):
        with pytest.raises(Exception):
            metricsrelay.replica_port(bad)
