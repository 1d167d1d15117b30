"""Nagle's algorithm off on the SSH connection's TCP socket (laguna_kit/run/ssh_connection.py)."""

import socket
from types import SimpleNamespace

from laguna_kit.run.ssh_connection import no_delay


def host_over(sock):
    transport = SimpleNamespace(sock=sock)
    client = SimpleNamespace(get_transport=lambda: transport)
    return SimpleNamespace(connector=SimpleNamespace(client=client))


def test_a_tcp_connection_gets_tcp_nodelay():
    server = socket.create_server(("127.0.0.1", 0))
    with server, socket.create_connection(server.getsockname()) as sock:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
        assert no_delay(host_over(sock))
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_a_proxy_pipe_or_no_connection_is_left_alone():
    a, b = socket.socketpair()
    with a, b:
        assert not no_delay(host_over(a))
    assert not no_delay(SimpleNamespace(connector=SimpleNamespace(client=None)))
    assert not no_delay(SimpleNamespace(connector=SimpleNamespace()))
