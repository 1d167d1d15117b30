"""laguna_kit/domain/hub.py: the hub's answers become one line each, before anything changes."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from laguna_kit.domain import hub

PINNED = "4bbfc285f2f8b3b6b526274c133b7b17aae6c8cb"


class MovedHub(BaseHTTPRequestHandler):
    """Answers model_info for any revision with another commit (a moved or rewritten ref)."""

    def log_message(self, *a):
        pass

    def do_GET(self):
        body = json.dumps(
            {"id": "poolside/Laguna-S-2.1-INT4", "sha": "f" * 40, "siblings": []}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_an_unreachable_hub_is_one_line_naming_it(monkeypatch):
    waits = []
    monkeypatch.setattr(hub.time, "sleep", waits.append)
    with pytest.raises(hub.HubError) as exc:
        hub.checkpoint("http://127.0.0.1:9", "poolside/Laguna-S-2.1-INT4", PINNED, "HF_TOKEN")
    assert str(exc.value).startswith("cannot reach the hub at http://127.0.0.1:9: ConnectError")
    assert "\n" not in str(exc.value)
    assert waits == list(hub.RETRY_WAITS_S)  # tried again before refusing, as the hub's client


class FlakyHub(BaseHTTPRequestHandler):
    """Answers model_info with the statuses queued in `server.statuses`, then the checkpoint."""

    def log_message(self, *a):
        pass

    def do_GET(self):
        status = self.server.statuses.pop(0) if self.server.statuses else 200
        self.server.calls += 1
        body = json.dumps(
            {"id": "poolside/Laguna-S-2.1-INT4", "sha": PINNED, "siblings": []}
            if status == 200
            else {"error": "hub trouble"}
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def flaky(statuses):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FlakyHub)
    srv.statuses, srv.calls = list(statuses), 0
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


@pytest.mark.parametrize("statuses", [[503, 500], [502, 429, 504]])
def test_a_transient_hub_error_is_tried_again_before_refusing(monkeypatch, statuses):
    """Issue 38 #8: an acceptance drill's 503 then 500 refused the run at once."""
    waits = []
    monkeypatch.setattr(hub.time, "sleep", waits.append)
    hub.checkpoint.cache_clear()
    srv, endpoint = flaky(statuses)
    try:
        ckpt = hub.checkpoint(endpoint, "poolside/Laguna-S-2.1-INT4", PINNED, "HF_TOKEN")
    finally:
        srv.shutdown()
    assert ckpt.commit == PINNED and srv.calls == len(statuses) + 1
    assert waits == list(hub.RETRY_WAITS_S[: len(statuses)])


def test_a_hub_down_for_good_and_a_refused_token_are_refused_saying_so(monkeypatch):
    monkeypatch.setattr(hub.time, "sleep", lambda s: None)
    hub.checkpoint.cache_clear()
    srv, endpoint = flaky([503] * 10)
    try:
        with pytest.raises(hub.HubError, match=r"HTTP 503 \(6 attempts over 23 s\)"):
            hub.checkpoint(endpoint, "poolside/Laguna-S-2.1-INT4", PINNED, "HF_TOKEN")
    finally:
        srv.shutdown()
    srv, endpoint = flaky([401])
    try:
        with pytest.raises(hub.HubError) as exc:
            hub.checkpoint(endpoint, "poolside/Laguna-S-2.1-INT4", PINNED, "HF_TOKEN")
    finally:
        srv.shutdown()
    assert srv.calls == 1, "a refused token is not tried again"
    assert "refused the token in HF_TOKEN (HTTP 401)" in str(exc.value)
    assert "accept the model's terms" in str(exc.value)


def test_a_pinned_revision_answered_with_another_commit_is_refused():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), MovedHub)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{srv.server_address[1]}"
        with pytest.raises(
            hub.HubError, match=f"answered the pinned revision {PINNED} with commit f{{40}}"
        ):
            hub.checkpoint(endpoint, "poolside/Laguna-S-2.1-INT4", PINNED, "HF_TOKEN")
    finally:
        srv.shutdown()


def test_a_record_without_a_passed_index_check_is_not_converged():
    files = (
        hub.HubFile("model.safetensors.index.json", 10, None, "b" * 40),
        hub.HubFile("model-1.safetensors", 100, "a" * 64, "c" * 40),
    )
    ckpt = hub.Checkpoint("poolside/x", PINNED, files)
    stats = {f.path: {"size": f.size, "mtime_ns": 1, "inode": 2} for f in files}
    record = {
        "revision": PINNED,
        "files": {
            f.path: {"size": f.size, "mtime_ns": 1, "inode": 2, "hash": f.sha256 or f.blob_id}
            for f in files
        },
    }
    assert hub.not_verified(ckpt, stats, record) == [
        "model.safetensors.index.json not checked against the shards"
    ]
    assert hub.not_verified(ckpt, stats, dict(record, index_checked=True)) == []


def test_a_mirror_manifest_naming_a_file_outside_is_refused(tmp_path):
    folder = tmp_path / f"poolside__x@{PINNED}"
    folder.mkdir()
    (folder / hub.MIRROR_MANIFEST).write_text(
        json.dumps(
            {
                "repo": "poolside/x",
                "revision": PINNED,
                "files": [
                    {
                        "path": "../../root/.ssh/id_ed25519",
                        "size": 1,
                        "sha256": None,
                        "blob_id": "b" * 40,
                    }
                ],
            }
        )
    )
    with pytest.raises(hub.HubError, match="not a plain relative path; nothing was changed"):
        hub.checkpoint_from_mirror(str(tmp_path), "poolside/x", PINNED)
