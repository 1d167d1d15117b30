"""boxtools/routeragent.py: the router agent's answer (issue 37 #5 and #7): a late, empty or
unknown replica is drained; a replica whose port a non-root user holds is drained; the
router's checks alone are counted; run for real over a socket pair as systemd runs it."""

import os
import socket
import subprocess
import sys

from laguna_kit import KIT_ROOT
from laguna_kit.boxtools import routeragent

HEADER = (
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
    "timeout inode\n"
)


def table(tmp_path, *rows) -> str:
    """A /proc/net/tcp of (port, state, uid) rows."""
    path = tmp_path / "tcp"
    lines = [
        f"   {i}: 00000000:{port:04X} 00000000:0000 {st} 00000000:00000000 00:00000000 00000000 "
        f"{uid:5d}        0 {1000 + i} 1 0000000000000000 100 0 0 10 0\n"
        for i, (port, st, uid) in enumerate(rows)
    ]
    path.write_text(HEADER + "".join(lines))
    return str(path)


def replicas(tmp_path):
    return {1: (8080, str(tmp_path / "d1")), 2: (8081, str(tmp_path / "d2"))}


def test_root_listening_and_not_drained_is_ready(tmp_path):
    t = table(tmp_path, (8080, "0A", 0), (8081, "0A", 0), (8080, "01", 65534))
    assert routeragent.answer(1, replicas(tmp_path), (t,)) == "ready"
    (tmp_path / "d2").write_text("{}")
    assert routeragent.answer(2, replicas(tmp_path), (t,)) == "drain"


def test_a_port_taken_by_another_user_is_drained(tmp_path):
    """A nobody listener on the replica's port while it restarts (or beside it on [::]) would
    get the router's traffic: drain."""
    alone = table(tmp_path, (8080, "0A", 65534))
    assert routeragent.answer(1, replicas(tmp_path), (alone,)) == "drain"
    beside = table(tmp_path, (8080, "0A", 0), (8080, "0A", 65534))
    assert routeragent.answer(1, replicas(tmp_path), (beside,)) == "drain"
    nobody_there = table(tmp_path)
    assert routeragent.answer(1, replicas(tmp_path), (nobody_there,)) == "drain"


def test_a_late_empty_or_unknown_replica_is_drained(tmp_path):
    r = replicas(tmp_path)
    for line in ("", "3\n", "0\n", "x\n", "$(touch x)\n", "1 2\n", "123\n"):
        assert routeragent.replica_asked(line, r) is None, line
        assert routeragent.answer(None, r) == "drain"
    assert routeragent.replica_asked("2\n", r) == 2 and routeragent.replica_asked("1", r) == 1


def test_only_remote_checks_are_counted(tmp_path):
    assert routeragent.remote("100.90.9.2") and routeragent.remote("fd7a:115c:a1e0::9")
    assert not routeragent.remote("127.0.0.1") and not routeragent.remote("::1")
    assert not routeragent.remote(None) and not routeragent.remote("junk")
    for _ in range(3):
        routeragent.count_check(str(tmp_path), 2)
    assert (tmp_path / "2.checks").read_text() == "3"


def run_agent(tmp_path, send: bytes | None, remote_addr: str, delay: float = 0.0) -> str:
    """The launcher as systemd runs it (Accept=yes): the connection on stdin and stdout."""
    mine, theirs = socket.socketpair()
    lib = KIT_ROOT / "laguna_kit"
    env = dict(os.environ, REMOTE_ADDR=remote_addr, PYTHONPATH=str(lib))
    code = "import sys; from boxtools.routeragent import main; sys.exit(main())"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "--checks-dir", str(tmp_path),
         "--replica", f"1=1:{tmp_path / 'd1'}", "--replica", f"2=2:{tmp_path / 'd2'}"],
        stdin=theirs, stdout=theirs, env=env,
    )  # fmt: skip
    theirs.close()
    if delay:
        proc.wait(timeout=5)
    if send is not None:
        try:
            mine.sendall(send)
        except OSError:
            pass
    out = mine.recv(64).decode()
    proc.wait(timeout=5)
    mine.close()
    return out.strip()


def test_the_agent_over_a_socket(tmp_path):
    # port 1 has no root listener here: every answer is drain, and the checks are counted
    assert run_agent(tmp_path, b"2\n", "100.90.9.2") == "drain"
    assert run_agent(tmp_path, b"2\n", "127.0.0.1") == "drain"
    assert (tmp_path / "2.checks").read_text() == "1"
    # a replica number sent after the wait: answered drain without it, nothing counted
    assert run_agent(tmp_path, None, "100.90.9.2", delay=1) == "drain"
    assert not (tmp_path / "1.checks").exists()
