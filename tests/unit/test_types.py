"""The type checker over laguna_kit (mypy.ini: check_untyped_defs): 0 errors. A fact's shape is
its return type, so an operation reading a key the fact does not give is caught here."""

import subprocess
import sys

from laguna_kit import KIT_ROOT


def test_mypy_finds_no_error(tmp_path):
    proc = subprocess.run(  # its cache in this run's own folder: any user, after any other run
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", str(tmp_path)],
        cwd=KIT_ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
