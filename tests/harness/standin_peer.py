"""Stand-in for a fleet peer's checkpoint file server (tasks/peer_files.py runs the distribution's
nginx; the harness tier drills that one). The fast tier's fetch tests use this in-process
server instead, answering the way nginx 1.22 does for static files (ngx_http_static_module and
ngx_http_range_filter_module): 200 with Content-Length, `Range: bytes=N-` → 206 with
`Content-Range: bytes N-END/SIZE`, N past the end → 416 with `Content-Range: bytes */SIZE`, a path
outside what the configuration serves → 404; and `/_progress/<name>` → the progress folder's file
(files/peer-files-nginx.conf.j2 maps it so).

Faults (`Peer.faults`): {"corrupt": {path}} flips served bytes of that file (a compromised or
rotten peer), {"die_after": {path: n}} sends n bytes of that file, then the peer goes away
(the connection reset, every later request refused: a peer killed mid-transfer), {"pad": {path}}
sends junk after the file (more bytes than it has), {"bad_range": {path}} answers a resume with
another range than asked.
"""

from __future__ import annotations

import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote


class Peer:
    def __init__(self, root: str, progress_dir: str):
        self.root, self.progress_dir = root, progress_dir
        self.faults: dict = {"corrupt": set(), "die_after": {}, "pad": set(), "bad_range": set()}
        self.served: dict[str, int] = {}
        self.dead = False
        self.lock = threading.Lock()
        handler = type("H", (_Handler,), {"peer": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.dead = True
        self.server.shutdown()
        self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    peer: Peer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _status(self, code: int, extra: dict | None = None):
        self.send_response(code)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        peer = self.peer
        if peer.dead:
            self.close_connection = True
            self.connection.shutdown(2)
            return
        path = unquote(self.path.split("?", 1)[0])
        m = re.fullmatch(r"/_progress/(laguna-fetch-[A-Za-z0-9._-]+\.progress\.json)", path)
        if m:
            full = os.path.join(peer.progress_dir, m.group(1))
        elif re.search(r"/\.laguna-(partial|quarantine)/", path) or ".." in path.split("/"):
            return self._status(404)
        else:
            full = os.path.join(peer.root, path.lstrip("/"))
        if not os.path.isfile(full):
            return self._status(404)
        with open(full, "rb") as fh:
            data = fh.read()
        rel = os.path.relpath(full, peer.root)
        start, status = 0, 200
        rng = self.headers.get("Range")
        if rng:
            rm = re.fullmatch(r"bytes=(\d+)-", rng.strip())
            if not rm or int(rm.group(1)) >= len(data):
                return self._status(416, {"Content-Range": f"bytes */{len(data)}"})
            start, status = int(rm.group(1)), 206
        name = os.path.basename(rel)
        body = data[start:] + (b"\0" * 65536 if name in peer.faults["pad"] else b"")
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            first = 0 if name in peer.faults["bad_range"] else start
            self.send_header("Content-Range", f"bytes {first}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if name in peer.faults["corrupt"]:
            body = bytes(b ^ 0xFF for b in body[:64]) + body[64:]
        die = peer.faults["die_after"].get(name)
        if die is not None:
            body = body[: max(die - start, 0)]
        try:
            for i in range(0, len(body), 1 << 16):
                self.wfile.write(body[i : i + (1 << 16)])
                with peer.lock:
                    peer.served[rel] = peer.served.get(rel, 0) + len(body[i : i + (1 << 16)])
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return
        if die is not None:
            peer.dead = True  # killed mid-file: this connection and every later one fail
            self.close_connection = True
            self.connection.shutdown(2)
