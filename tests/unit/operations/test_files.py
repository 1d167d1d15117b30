"""operations/files.py's key fetch with candidate URLs, run by a real shell against a local HTTP
server: every candidate that answers is kept in one keyring, a 404 skipped, none found fails."""

import http.server
import shutil
import subprocess
import threading

import pytest

from laguna_kit.operations.files import fetch_command

KEY_A, KEY_B = b"\x99\x01\x0dkey-a", b"\x99\x01\x0dkey-b"  # binary keys: joined as they are


@pytest.fixture
def repo():
    served = {"/a.pub": KEY_A, "/b.pub": KEY_B}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = served.get(self.path)
            self.send_response(200 if body else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.skipif(not shutil.which("curl"), reason="curl")
def test_candidate_keys_every_one_found_kept_a_404_skipped_none_fails(repo, tmp_path):
    dest = tmp_path / "keyring.gpg"
    run = lambda urls: subprocess.run(  # noqa: E731
        ["sh", "-c", fetch_command(urls, str(dest), "644")], capture_output=True, text=True
    )
    assert run((f"{repo}/missing.pub", f"{repo}/b.pub")).returncode == 0
    assert dest.read_bytes() == KEY_B and oct(dest.stat().st_mode)[-3:] == "644"
    dest.unlink()
    assert run((f"{repo}/a.pub", f"{repo}/b.pub")).returncode == 0
    assert dest.read_bytes() == KEY_A + KEY_B
    dest.unlink()
    done = run((f"{repo}/x.pub", f"{repo}/y.pub"))
    assert done.returncode != 0 and "none of" in done.stderr and not dest.exists()
    with pytest.raises(ValueError, match="binary .gpg keyring"):
        fetch_command(("u1", "u2"), str(tmp_path / "key.asc"), "644")
