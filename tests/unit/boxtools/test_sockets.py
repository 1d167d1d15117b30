"""laguna_kit/boxtools/sockets.py: the listeners of a port from the kernel's tables, read as the
kernel writes them (Documentation/networking/proc_net_tcp.rst: hex local address:port, st 0A =
LISTEN, uid in column 8, inode in column 10)."""

from laguna_kit.boxtools import sockets

HEAD = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  inode\n"
REST = "00000000:00000000 00:00000000 00000000"


def row(n, local, remote, st, uid, inode):
    return f"   {n}: {local} {remote} {st} {REST} {uid:>5}        0 {inode} 1\n"


def test_each_listener_of_the_port_with_its_owner_and_inode(tmp_path):
    v4, v6 = tmp_path / "tcp", tmp_path / "tcp6"
    v4.write_text(
        HEAD
        + row(0, "00000000:1F90", "00000000:0000", "0A", 0, 1111)
        + row(1, "0100007F:1F90", "0100007F:9C40", "01", 0, 2222)  # a connection, not a listener
        + row(2, "00000000:1F91", "00000000:0000", "0A", 65534, 3333)
    )
    any6 = "0" * 32
    v6.write_text(HEAD + row(0, f"{any6}:1F90", f"{any6}:0000", "0A", 65534, 4444))
    got = sockets.listening(0x1F90, (str(v4), str(v6), str(tmp_path / "gone")))
    assert got == [{"uid": 0, "inode": "1111"}, {"uid": 65534, "inode": "4444"}]
    assert sockets.listening(0x1F91, (str(v4),)) == [{"uid": 65534, "inode": "3333"}]
