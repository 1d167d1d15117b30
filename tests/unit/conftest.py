"""The fast tier runs as any user, on any machine, after anything: nothing it writes or opens lies
outside the folders pytest gives this run (a root harness run on the same machine leaves
root-owned files in the boxes' shared places; the fast tier never reads them)."""

import pytest


@pytest.fixture(scope="session", autouse=True)
def own_standin_cards(tmp_path_factory):
    """The stand-in vLLM's card locks (STANDIN_GPU_LOCK_DIR) in this run's own folder, not the
    box's /dev/shm: every stand-in the fast tier starts inherits it."""
    folder = tmp_path_factory.mktemp("standin-cards")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STANDIN_GPU_LOCK_DIR", str(folder))
        yield folder
