"""laguna-metrics-relay: the fleet monitor's one way to vLLM's /metrics on a GPU box.

vLLM serves /metrics on its API port, beside the API itself and without a key. A monitor that
scraped the API port could be let through the box's firewall to the whole API, and so could any
process on the monitor's host. This relay answers `GET /metrics/<replica>` (`/metrics`: replica 1)
with that replica's /metrics, fetched over loopback, and nothing else (404 for any other path,
501 for any other method); the box's firewall lets the monitor reach this port and node exporter,
never the API. It runs as a dynamic user with no write access anywhere (its unit).

Standard library only (the distribution's python3).
"""

from __future__ import annotations

import argparse
import socket
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BYTES = 64 << 20  # vLLM's page is ~100 KiB; more is not a metrics page
TIMEOUT_S = 10.0  # Prometheus's own scrape timeout is at most 10 s here


def replica_of(path: str, ports: dict[int, int]) -> int | None:
    """The replica a request path asks for (None: not a metrics path of this box)."""
    path = path.split("?", 1)[0]
    if path == "/metrics":
        return 1 if 1 in ports else None
    tail = path.removeprefix("/metrics/")
    if tail == path or not tail.isdigit() or len(tail) > 2:
        return None
    n = int(tail)
    return n if n in ports else None


class Relay(BaseHTTPRequestHandler):
    ports: dict[int, int] = {}  # replica -> its API port on loopback
    server_version = "laguna-metrics-relay"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        n = replica_of(self.path, self.ports)
        if n is None:
            self.answer(404, b"not found: this port serves /metrics/<replica> alone\n")
            return
        url = f"http://127.0.0.1:{self.ports[n]}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as r:
                body = r.read(MAX_BYTES + 1)
                kind = r.headers.get("Content-Type") or "text/plain; version=0.0.4"
        except (urllib.error.URLError, OSError) as exc:
            self.answer(502, f"replica {n} did not answer: {exc}\n".encode())
            return
        if len(body) > MAX_BYTES:
            self.answer(502, b"replica's metrics page is too large\n")
            return
        self.answer(200, body, kind)

    def answer(self, status: int, body: bytes, kind: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's name
        pass  # a scrape every 15 s is not worth a journal line


class DualStack(ThreadingHTTPServer):
    """IPv6 and IPv4 on one socket ("::"); a box with IPv6 off binds IPv4 alone (serve)."""

    address_family = socket.AF_INET6
    daemon_threads = True

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def serve(port: int, ports: dict[int, int]) -> ThreadingHTTPServer:
    handler = type("BoxRelay", (Relay,), {"ports": dict(ports)})
    try:
        return DualStack(("::", port), handler)
    except OSError:
        return ThreadingHTTPServer(("0.0.0.0", port), handler)


def replica_port(text: str) -> tuple[int, int]:
    """N=PORT (a replica and its API port)."""
    n, _, port = text.partition("=")
    if not (n.isdigit() and port.isdigit() and 0 < int(port) < 65536):
        raise argparse.ArgumentTypeError(f"{text!r} is not N=PORT")
    return int(n), int(port)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True, help="where the monitor scrapes")
    ap.add_argument("--replica", type=replica_port, action="append", required=True)
    args = ap.parse_args(argv)
    server = serve(args.port, dict(args.replica))
    print(f"laguna-metrics-relay: /metrics of {len(args.replica)} replica(s) on port {args.port}")
    sys.stdout.flush()
    server.serve_forever()
    return 0
