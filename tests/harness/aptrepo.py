"""The harness's package servers' content: signed apt repositories and a PyPI-style wheel index.

Laid out as the real servers are, so the kit's production code path (sources list with
``signed-by``, key download, ``apt-get install``, ``pip install --index-url``) runs unchanged and
only the base URLs and the key differ:

- ``debian/``    a partial Debian mirror: the real distro debs the kit installs (main) for each of
                 rootfs.SUITES (bookworm, trixie), each suite signed with the harness key;
- ``nvidia/``    NVIDIA's flat libnvidia-container repo (``stable/deb/amd64 /``), key at ``gpgkey``;
- ``cuda/``      NVIDIA's CUDA repositories for debian12 and debian13 (``repos/debianN/x86_64/ /``),
                 the driver;
- ``tailscale/`` Tailscale's ``stable/debian <suite> main`` repos, keys at ``<suite>.noarmor.gpg``;
- ``pypi/simple/`` wheels for the box-side venv (huggingface_hub and its dependencies).
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

from laguna_kit.knobs import declared

from . import nvidia_repos, rootfs
from .errors import HarnessError
from .paths import cache_dir

HERE = Path(__file__).parent
STANDINS = HERE / "standin_packages"

# Versions the hand-made stand-ins claim (NVIDIA's repositories: nvidia_repos.py).
VERSIONS = {"TAILSCALE_VERSION": "1.90.6"}
# What the box-side venv installs (the kit's own pins); pip resolves their dependencies.
BOX_WHEELS = declared.defaults()["box_venv_packages"]
# The python3 of each release a box runs (bookworm 3.11, trixie 3.13): a wheel with compiled code
# (PyYAML) is built per version.
BOX_PYTHONS = ("3.11", "3.13")


def _run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, **kw)
    if proc.returncode != 0:
        raise HarnessError(
            f"{' '.join(map(str, cmd))} failed: {proc.stderr.decode(errors='replace')[-1500:]}"
        )
    return proc.stdout


def gpg_home() -> Path:
    """One signing key for every harness repo, made once and cached."""
    home = cache_dir() / "gnupg"
    if not (home / ".complete").exists():
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(mode=0o700)
        _run(
            [
                "gpg",
                "--homedir",
                str(home),
                "--batch",
                "--passphrase",
                "",
                "--quick-gen-key",
                "laguna-kit harness repo signing <harness@invalid>",
                "ed25519",
                "sign",
                "never",
            ]
        )
        (home / ".complete").write_text("\n")
    return home


def _gpg(*args) -> bytes:
    return _run(["gpg", "--homedir", str(gpg_home()), "--batch", "--yes", *args])


def build_standin_deb(name: str, out: Path) -> Path:
    """Stage tests/harness/standin_packages/<name>, substitute @VERSION@ markers, dpkg-deb it."""
    src = STANDINS / name
    stage = out / f".stage-{name}"
    shutil.rmtree(stage, ignore_errors=True)
    shutil.copytree(src, stage, symlinks=True, ignore=shutil.ignore_patterns("control", "postinst"))
    (stage / "DEBIAN").mkdir()
    for meta in ("control", "postinst"):
        if (src / meta).exists():
            shutil.copy2(src / meta, stage / "DEBIAN" / meta)
    for path in stage.rglob("*"):
        if path.is_file() and not path.is_symlink():
            text = path.read_bytes()
            for key, val in VERSIONS.items():
                text = text.replace(f"@{key}@".encode(), val.encode())
            path.write_bytes(text)
    version = next(
        line.split(": ", 1)[1]
        for line in (stage / "DEBIAN/control").read_text().splitlines()
        if line.startswith("Version: ")
    )
    deb = out / f"{name}_{version}_amd64.deb"
    _run(["dpkg-deb", "--root-owner-group", "--build", str(stage), str(deb)])
    shutil.rmtree(stage)
    return deb


def build_placeholder_deb(
    name: str, version: str, description: str, out: Path, depends: str = ""
) -> Path:
    """An empty package standing in for one whose real content is useless here (no real kernel)."""
    stage = out / f".stage-{name}"
    shutil.rmtree(stage, ignore_errors=True)
    (stage / "DEBIAN").mkdir(parents=True)
    (stage / "DEBIAN/control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: amd64\nMaintainer: laguna-kit harness "
        f"<harness@invalid>\nSection: kernel\nPriority: optional\n"
        + (f"Depends: {depends}\n" if depends else "")
        + "Description: STAND-IN "
        f"{description}\n"
        " Empty package built by the laguna-kit test harness.\n"
    )
    deb = out / f"{name}_{version}_amd64.deb"
    _run(["dpkg-deb", "--root-owner-group", "--build", str(stage), str(deb)])
    shutil.rmtree(stage)
    return deb


def _index(repo_root: Path, pool_rel: str, packages_rel: str) -> None:
    """Write Packages and Packages.gz for the debs under pool_rel, paths relative to repo_root."""
    data = _run(["apt-ftparchive", "packages", pool_rel], cwd=repo_root)
    target = repo_root / packages_rel
    target.mkdir(parents=True, exist_ok=True)
    (target / "Packages").write_bytes(data)
    with gzip.open(target / "Packages.gz", "wb") as fh:
        fh.write(data)


def _sign(release_dir: Path, *conf: str) -> None:
    release = _run(
        ["apt-ftparchive", *sum((["-o", c] for c in conf), []), "release", "."], cwd=release_dir
    )
    (release_dir / "Release").write_bytes(release)
    _gpg("--clearsign", "-o", str(release_dir / "InRelease"), str(release_dir / "Release"))
    _gpg(
        "--armor",
        "--detach-sign",
        "-o",
        str(release_dir / "Release.gpg"),
        str(release_dir / "Release"),
    )


# NVIDIA's CUDA repository per distribution, and the name of the signing key file the stand-in
# serves there: debian12's is 3bf863cc.pub (NVIDIA's install guide); debian13's is not confirmed
# here (package_sources.DRIVERS), so its stand-in serves the kit's second candidate only, and a box
# that finds the first missing must take the second.
CUDA_DISTROS = {"debian12": "3bf863cc.pub", "debian13": "8793F200.pub"}


def build() -> Path:
    """Build (or reuse) the whole served tree; returns its root."""
    debs = {suite: rootfs.distro_debs(suite) for suite in rootfs.SUITES}
    root = cache_dir() / "served"
    stamp_inputs = sorted(
        str(p.relative_to(HERE)) + str(p.stat().st_mtime_ns)
        for tree in (STANDINS, nvidia_repos.HERE)
        for p in tree.rglob("*")
        if p.is_file()
    ) + [str((HERE / "nvidia_repos.py").stat().st_mtime_ns), repr(nvidia_repos.TOOLKIT_VERSIONS)]
    stamp = (
        "\n".join(
            [repr(debs), repr(VERSIONS), repr(BOX_WHEELS), repr(BOX_PYTHONS), repr(CUDA_DISTROS)]
            + [os.uname().release]
            + stamp_inputs
        )
        + "\n"
    )
    if (root / ".stamp").exists() and (root / ".stamp").read_text() == stamp:
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    public_armored = _gpg("--armor", "--export")
    public_binary = _gpg("--export")
    (root / "harness-key.asc").write_bytes(public_armored)
    (root / "harness-key.gpg").write_bytes(public_binary)
    for suite, suite_debs in debs.items():
        _debian_suite(root / "debian", suite, suite_debs)
        _tailscale_suite(root / "tailscale/stable/debian", suite, public_binary)

    # NVIDIA's flat repositories: the container toolkit's, and the CUDA repository's per distro.
    work = root / ".stubs"
    flat = root / "nvidia/stable/deb/amd64"
    flat.mkdir(parents=True)
    nvidia_repos.build_toolkit_repo(flat, work)
    _index(flat, ".", ".")
    _sign(flat, "APT::FTPArchive::Release::Origin=NVIDIA-standin")
    (root / "nvidia/gpgkey").write_bytes(public_armored)
    for shape in nvidia_repos.CUDA_SHAPES:  # cuda/ (split) and cuda-bundled/
        for distro, key_name in CUDA_DISTROS.items():
            top = root / ("cuda" if shape == "split" else f"cuda-{shape}")
            cuda = top / f"repos/{distro}/x86_64"
            cuda.mkdir(parents=True)
            nvidia_repos.build_cuda_repo(cuda, work, shape)
            _index(cuda, ".", ".")
            _sign(cuda, "APT::FTPArchive::Release::Origin=NVIDIA-CUDA-standin")
            (cuda / key_name).write_bytes(public_armored)
    shutil.rmtree(work)

    build_wheel_index(root / "pypi/simple")
    (root / ".stamp").write_text(stamp)
    return root


def _debian_suite(deb_root: Path, suite: str, debs: Path) -> None:
    """One release of the partial Debian mirror: its own pool, index and signed Release."""
    pool = deb_root / "pool" / suite
    pool.mkdir(parents=True)
    for deb in debs.glob("*.deb"):
        shutil.copy(deb, pool / deb.name)
    # The boxes run this machine's kernel, which no archive has headers for. The metapackage the
    # kit installs so the next kernel gets a module depends on the running kernel's headers, as
    # Debian's does (bookworm: linux-headers-amd64 Depends linux-headers-6.1.0-N-amd64; trixie:
    # linux-headers-6.12.N-amd64).
    build_placeholder_deb(
        f"linux-headers-{os.uname().release}", "1", "kernel headers for the harness kernel", pool
    )
    build_placeholder_deb(
        "linux-headers-amd64",
        "1",
        "kernel headers metapackage (follows the harness kernel)",
        pool,
        depends=f"linux-headers-{os.uname().release}",
    )
    dist = deb_root / "dists" / suite
    _index(deb_root, f"pool/{suite}", f"dists/{suite}/main/binary-amd64")
    for comp in ("contrib", "non-free", "non-free-firmware"):
        _write_empty(dist / comp / "binary-amd64")
    _sign(
        dist,
        f"APT::FTPArchive::Release::Suite={suite}",
        f"APT::FTPArchive::Release::Codename={suite}",
        "APT::FTPArchive::Release::Architectures=amd64",
        "APT::FTPArchive::Release::Components=main contrib non-free non-free-firmware",
        "APT::FTPArchive::Release::Origin=Debian",
    )


def _tailscale_suite(ts_root: Path, suite: str, public_binary: bytes) -> None:
    """Tailscale's repository for one release (pkgs.tailscale.com/stable/debian <suite> main)."""
    pool = ts_root / "pool" / suite
    pool.mkdir(parents=True)
    build_standin_deb("tailscale", pool)
    _index(ts_root, f"pool/{suite}", f"dists/{suite}/main/binary-amd64")
    _sign(
        ts_root / "dists" / suite,
        f"APT::FTPArchive::Release::Suite={suite}",
        f"APT::FTPArchive::Release::Codename={suite}",
        "APT::FTPArchive::Release::Components=main",
        "APT::FTPArchive::Release::Architectures=amd64",
        "APT::FTPArchive::Release::Origin=Tailscale-standin",
    )
    (ts_root / f"{suite}.noarmor.gpg").write_bytes(public_binary)


def _write_empty(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "Packages").write_bytes(b"")
    with gzip.open(path / "Packages.gz", "wb"):
        pass


def build_wheel_index(simple: Path) -> None:
    """A PEP 503 'simple' tree: one folder per normalised project name holding its wheels."""
    wheels = cache_dir() / "wheels"
    wheels.mkdir(exist_ok=True)
    for python in BOX_PYTHONS:
        _run(
            [
                sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
                "--dest", str(wheels), "--python-version", python,
                "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64",
                "--platform", "manylinux_2_17_x86_64",
                *BOX_WHEELS,
            ]
        )  # fmt: skip
    for whl in wheels.glob("*.whl"):
        project = whl.name.split("-")[0].lower().replace("_", "-").replace(".", "-")
        (simple / project).mkdir(parents=True, exist_ok=True)
        shutil.copy(whl, simple / project / whl.name)
