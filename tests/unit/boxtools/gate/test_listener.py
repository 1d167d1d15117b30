"""boxtools/gate/listener.py (issue 37 #5): the gate passes only while the replica's container
alone listens on its port, read from a /proc laid out as the kernel lays it out."""

import os

import pytest

from laguna_kit.boxtools.gate import listener
from laguna_kit.boxtools.gate.failure import GateFailure

HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"


def fake_proc(tmp_path, sockets, processes):
    """sockets: [(port, inode, uid)] listening; processes: {pid: (cgroup, [inodes], cmdline)}."""
    proc = tmp_path / "proc"
    (proc / "net").mkdir(parents=True)
    rows = "".join(
        f"   {i}: 00000000:{port:04X} 00000000:0000 0A 00000000:00000000 00:00000000 00000000 "
        f"{uid:5d}        0 {inode} 1 0000000000000000 100 0 0 10 0\n"
        for i, (port, inode, uid) in enumerate(sockets)
    )
    (proc / "net/tcp").write_text(HEADER + rows)
    (proc / "net/tcp6").write_text(HEADER)
    for pid, (cgroup, inodes, cmdline) in processes.items():
        (proc / str(pid) / "fd").mkdir(parents=True)
        (proc / str(pid) / "cgroup").write_text(cgroup + "\n")
        (proc / str(pid) / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode())
        for n, inode in enumerate(inodes):
            os.symlink(f"socket:[{inode}]", proc / str(pid) / "fd" / str(n + 3))
    return str(proc)


CONTAINER = "0::/system.slice/docker-0123abcd.scope"


def test_the_containers_own_listener_passes(tmp_path, monkeypatch):
    proc = fake_proc(
        tmp_path,
        [(8080, 555, 0)],
        {100: (CONTAINER, [], "python3 -m vllm"), 101: (CONTAINER, [555], "vllm serve")},
    )
    monkeypatch.setattr(listener, "container_pid", lambda c: 100)
    listener.listener_check(8080, "vllm-laguna", proc)


def test_a_listener_outside_the_container_fails_the_gate(tmp_path, monkeypatch):
    proc = fake_proc(
        tmp_path,
        [(8080, 555, 0), (8080, 777, 65534)],
        {
            100: (CONTAINER, [555], "vllm serve"),
            4242: ("0::/user.slice/session-3.scope", [777], "python3 -m http.server 8080"),
        },
    )
    monkeypatch.setattr(listener, "container_pid", lambda c: 100)
    with pytest.raises(GateFailure, match="pid 4242: python3 -m http.server 8080"):
        listener.listener_check(8080, "vllm-laguna", proc)


def test_nothing_listening_fails(tmp_path, monkeypatch):
    proc = fake_proc(tmp_path, [(8081, 555, 0)], {100: (CONTAINER, [555], "vllm")})
    monkeypatch.setattr(listener, "container_pid", lambda c: 100)
    with pytest.raises(GateFailure, match="nothing listens on port 8080"):
        listener.listener_check(8080, "vllm-laguna", proc)


def test_the_container_is_named_by_the_releases_own_argv():
    from laguna_kit.boxtools.gate.cli import container_of

    argv = ["docker", "run", "--rm", "--name", "vllm-laguna-2", "--gpus", "all", "img"]
    assert container_of(argv) == "vllm-laguna-2" and container_of(["docker", "run"]) is None
