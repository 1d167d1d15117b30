"""laguna_kit/boxtools/fetch/tally.py: the run's byte counts, added to from many threads."""

import threading

from laguna_kit.boxtools.fetch import tally


def test_counts_from_many_threads_add_up():
    counter = tally.new()

    def work():
        for _ in range(1000):
            tally.add(counter, hashed_bytes=1, peer_bytes=2)
        tally.note(counter, "left_peers", "x")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter["hashed_bytes"] == 8000 and counter["peer_bytes"] == 16000
    assert counter["left_peers"] == ["x"] * 8 and counter["downloaded_bytes"] == 0
