"""The code's shape: `ruff check` and `ruff format --check` (ruff.toml) are clean."""

import subprocess
import sys
from pathlib import Path

from laguna_kit import KIT_ROOT

RUFF = str(Path(sys.executable).with_name("ruff"))


def test_ruff_check_is_clean():
    proc = subprocess.run(
        [RUFF, "check", "--no-cache", "."], cwd=KIT_ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_is_clean():
    proc = subprocess.run(
        [RUFF, "format", "--check", "--no-cache", "."], cwd=KIT_ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
