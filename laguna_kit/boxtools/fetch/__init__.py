"""laguna-fetch: put one pinned checkpoint into a folder, every file checked against the hub's
hashes.

Installed on the box by tasks/box_tools.py, started by tasks/download.py (waited for by
tasks/models.py) in a transient unit, in the kit's venv (huggingface_hub). The control machine
sends the manifest it read from the hub's own metadata (path, size, LFS sha256 or git blob id per
file); the fetch:

- skips files whose verified-state record still matches their stat (size, mtime, inode): a
  converged re-run hashes nothing (records.py: the one rule of what a record proves);
- hashes present files without a matching record (verify.py);
- downloads missing or wrong files with HTTP Range into ``.laguna-partial/<file>.part``, resuming a
  killed transfer from the bytes on disk, and renames a file into place only after its hash
  matched, so a half file never looks complete (transfer.py, folder.py);
- hashes bytes as they arrive (a resumed part's existing bytes once), so a download needs no second
  read pass;
- resumes a timeout, a reset or an HTTP 5xx within the same run, with bounded retries and backoff
  (as huggingface_hub's own ``http_get`` does: the count starts again whenever bytes arrived); only
  exhausted retries fail, naming the file, the bytes on disk and the last error;
- writes its progress (bytes done / total, rate, ETA) to ``--progress`` every few seconds, read by
  the deploy while it waits and by tasks/status.py (progress.py);
- quarantines a mismatching file (``.laguna-quarantine/``) and fetches it once more; a second
  mismatch fails with the file name and both hashes;
- checks that model.safetensors.index.json names exactly the shards present;
- checks free space before the first byte (plan.py: what the run has to do, decided before it
  does it);
- keeps another revision's folder whole for rollback (revisions.py) and hard-links the files
  a new revision did not change;
- asks the fleet's peers before the hub (peers.py);
- offline (``--uploaded DIR``): verifies the files the control machine pushed from its mirror the
  same way, instead of downloading (uploaded.py).

Prints one JSON summary line on stdout; errors go to stderr with exit code 2 (cli.py). The hub
token is read from a 0600 file (``--token-file``), never from argv or the environment of another
process. Every module here imports the standard library only at import time: the hub client
(huggingface_hub, httpx2) is imported when a download starts, so the release manager (system
python) can use revisions.py.
"""

from .cli import main

__all__ = ["main"]
