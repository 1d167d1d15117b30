"""Where the harness keeps its caches and per-box state (outside the checkout, survives clones)."""

import os
from pathlib import Path


def cache_dir() -> Path:
    path = Path(os.environ.get("LAGUNA_HARNESS_CACHE", "/var/cache/laguna-kit-harness"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_dir() -> Path:
    """Live state (box overlays, sockets, pid files); cleared by teardown."""
    path = Path(os.environ.get("LAGUNA_HARNESS_RUN", "/run/laguna-kit-harness"))
    path.mkdir(parents=True, exist_ok=True)
    return path
