"""Stand-ins for NVIDIA's apt repositories: the CUDA repository for debian12 (the driver) and the
libnvidia-container repository (the container toolkit), with the real packages' names, versions and
relations, so apt resolves (or fails to) as it would for real. Not NVIDIA software.

Where the metadata comes from:
- Driver packages: Debian's own split of the driver, read with `apt-cache show` on bookworm
  non-free (nvidia-smi Depends nvidia-alternative (= V), libnvidia-ml1 (= V); libcuda1 Depends
  nvidia-alternative (= V) and Recommends nvidia-kernel-dkms | nvidia-kernel-V, nvidia-smi,
  nvidia-persistenced; nvidia-kernel-dkms Depends firmware-nvidia-gsp (= V) | firmware-nvidia-gsp-V,
  nvidia-kernel-support--v1, Provides nvidia-kernel-V), which NVIDIA's CUDA repository follows;
  nvidia-driver-cuda and nvidia-kernel-open-dkms are NVIDIA's names (NVIDIA Driver Installation
  Guide; its forum: cuda-drivers-580 Depends nvidia-driver-cuda (>= 580...) and pulled 590
  components). Left out, as placeholders cannot stand for them: dkms and the shared libraries'
  own library dependencies (nvidia-support, libnvidia-ptxjitcompiler1, ...).
- Branch pinning: the repository holds the 580 and 590 branches; without
  nvidia-driver-pinning-580 apt takes 590, as the forum report above describes. The pinning file's
  exact lines are not confirmed here: this one pins the driver's packages to the branch.
- Toolkit: NVIDIA/nvidia-container-toolkit packaging/debian/control at v1.17.8 (toolkit Depends
  nvidia-container-toolkit-base (= V), libnvidia-container-tools (>= V), (<< 2.0.0); base Breaks
  nvidia-container-toolkit (<= 1.10.0-1)) and NVIDIA/libnvidia-container pkg/deb/control (tools
  Depends ${shlibs:Depends}, which is libnvidia-container1 (>= V)). The repository holds the
  kit's pinned version and a newer one, as NVIDIA's does.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from laguna_kit.knobs import declared

from .errors import HarnessError

HERE = Path(__file__).parent / "standin_nvidia"
# driver branch -> (version, the CUDA version its nvidia-smi reports): 580 is CUDA 13.0 (a real
# 580.159.04 machine reports 13.0: tests/data/nvidia-smi); 590 reports 13.1 (derived).
BRANCHES = {"580": ("580.95.05", "13.0"), "590": ("590.48.01", "13.1")}
TOOLKIT_VERSIONS = [declared.defaults()["nvidia_toolkit_version"], "1.18.0-1"]
LIBDIR = "usr/lib/x86_64-linux-gnu"


def _render(name: str, **values) -> bytes:
    text = (HERE / name).read_text()
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    return text.encode()


def stub_library(soname: str, work: Path) -> bytes:
    """A real (empty) ELF shared object with this soname, so ldconfig lists it like the real one."""
    work.mkdir(parents=True, exist_ok=True)
    src, out = work / "stub.c", work / soname
    src.write_text("int laguna_standin;\n")
    proc = subprocess.run(
        ["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(out), str(src)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise HarnessError(
            f"gcc could not build the stub {soname} (apt-get install gcc): {proc.stderr}"
        )
    return out.read_bytes()


def build_deb(
    out: Path,
    name: str,
    version: str,
    fields: dict,
    files: dict,
    postinst: str | None = None,
    conffiles: tuple[str, ...] = (),
) -> Path:
    """A .deb with these control fields and {path: (bytes, mode)} files (`conffiles`: absolute
    paths dpkg treats as configuration files, as debhelper marks every file under /etc)."""
    stage = out / f".stage-{name}-{version}"
    shutil.rmtree(stage, ignore_errors=True)
    (stage / "DEBIAN").mkdir(parents=True)
    control = {
        "Package": name,
        "Version": version,
        "Architecture": "amd64",
        "Maintainer": "laguna-kit harness <harness@invalid>",
        "Section": "non-free/libs",
        "Priority": "optional",
        **fields,
    }
    control.setdefault(
        "Description", f"STAND-IN {name} (laguna-kit test harness)\n Not NVIDIA software."
    )
    (stage / "DEBIAN/control").write_text("".join(f"{k}: {v}\n" for k, v in control.items()))
    if conffiles:
        (stage / "DEBIAN/conffiles").write_text("".join(f"{c}\n" for c in conffiles))
    if postinst:
        (stage / "DEBIAN/postinst").write_text("#!/bin/sh\nset -e\n" + postinst)
        (stage / "DEBIAN/postinst").chmod(0o755)
    for path, (data, mode) in files.items():
        target = stage / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(mode)
    deb = out / f"{name}_{version.split(':')[-1]}_amd64.deb"  # dpkg's naming: no epoch
    proc = subprocess.run(
        ["dpkg-deb", "--root-owner-group", "--build", str(stage), str(deb)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise HarnessError(f"dpkg-deb {name}: {proc.stderr}")
    shutil.rmtree(stage)
    return deb


# The module "loads" at the next boot, like a fresh driver: remember the boot it was installed in.
# (nspawn gives every boot its own boot id; an early-boot unit failed with 219/CGROUP when boxes
# rebooted together.)
MODULE_POSTINST = (
    # A real DKMS build of the module takes minutes: scripts/benchmarks.py asks for that time by
    # writing it into this file on the box (absent: no wait, as in the tests).
    'sleep "$(cat /etc/standin-nvidia/dkms-build-seconds 2>/dev/null || echo 0)"\n'
    "mkdir -p /var/lib/standin-nvidia\n"
    "cat /proc/sys/kernel/random/boot_id > /var/lib/standin-nvidia/installed-in-boot\n"
)


# The CUDA repository's two possible shapes (which one NVIDIA's 580 branch has is not confirmed:
# the kit must pass on both): "split", nvidia-driver-cuda depending on nvidia-smi, libcuda1,
# libnvidia-ml1 and nvidia-persistenced as packages of their own (Debian's own split); "bundled",
# nvidia-driver-cuda carrying them itself and Providing, Conflicting with and Replacing their names
# (as one public installer, janisxyz/nvstack lib/debian.sh, reports `nvidia-driver-cuda Conflicts:
# nvidia-smi`), the split packages still in the repository beside it.
CUDA_SHAPES = ("split", "bundled")
PIECES = ("nvidia-smi", "libcuda1", "libnvidia-ml1", "nvidia-persistenced")


def build_cuda_repo(out: Path, work: Path, shape: str = "split") -> None:
    """Both branches of the driver, as the CUDA repository for debian12 lays them out (flat)."""
    libs = {so: stub_library(so, work) for so in ("libcuda.so.1", "libnvidia-ml.so.1")}
    persistenced = b"#!/bin/sh\n# STAND-IN nvidia-persistenced (laguna-kit test harness)\nexit 0\n"
    for branch, (ver, cuda) in BRANCHES.items():
        v = f"{ver}-1"
        pin = (
            f"# STAND-IN of NVIDIA's nvidia-driver-pinning-{branch} (laguna-kit test harness)\n"
            f"Package: nvidia-* libnvidia-* libcuda1 firmware-nvidia-gsp\nPin: version {branch}.*\n"
            "Pin-Priority: 1000\n"
        ).encode()
        specs = [
            (
                f"nvidia-driver-pinning-{branch}",
                {},
                {f"etc/apt/preferences.d/nvidia-driver-pinning-{branch}": (pin, 0o644)},
                None,
            ),
            ("nvidia-alternative", {}, {}, None),
            ("firmware-nvidia-gsp", {"Provides": f"firmware-nvidia-gsp-{ver}"}, {}, None),
            ("nvidia-kernel-support", {"Provides": "nvidia-kernel-support--v1"}, {}, None),
            (
                "nvidia-kernel-dkms",
                {
                    "Depends": f"firmware-nvidia-gsp (= {v}) | firmware-nvidia-gsp-{ver}, "
                    f"nvidia-kernel-support--v1",
                    "Provides": f"nvidia-kernel-{ver}, nvidia-kernel-dkms-any (= {ver})",
                    "Conflicts": "nvidia-kernel-open-dkms",
                },
                {},
                MODULE_POSTINST,
            ),
            (
                "nvidia-kernel-open-dkms",
                {
                    "Depends": f"firmware-nvidia-gsp (= {v}) | firmware-nvidia-gsp-{ver}, "
                    f"nvidia-kernel-support--v1",
                    "Provides": f"nvidia-open-kernel-{ver}",
                    "Conflicts": "nvidia-kernel-dkms",
                },
                {},
                MODULE_POSTINST,
            ),
            (
                "libnvidia-ml1",
                {
                    "Depends": f"nvidia-alternative (= {v})",
                    "Provides": f"libnvidia-ml.so.1 (= {ver})",
                },
                {f"{LIBDIR}/libnvidia-ml.so.1": (libs["libnvidia-ml.so.1"], 0o644)},
                "ldconfig\n",
            ),
            (
                "libcuda1",
                {
                    "Depends": f"nvidia-alternative (= {v})",
                    "Recommends": f"nvidia-kernel-dkms (= {v}) | nvidia-kernel-{ver}, nvidia-smi, "
                    f"nvidia-persistenced",
                },
                {f"{LIBDIR}/libcuda.so.1": (libs["libcuda.so.1"], 0o644)},
                "ldconfig\n",
            ),
            (
                "nvidia-smi",
                {
                    "Depends": f"nvidia-alternative (= {v}), libnvidia-ml1 (= {v})",
                    "Recommends": f"nvidia-kernel-dkms (= {v}) | nvidia-kernel-{ver}",
                },
                {
                    "usr/bin/nvidia-smi": (
                        _render("nvidia-smi", DRIVER_VERSION=ver, CUDA_VERSION=cuda),
                        0o755,
                    )
                },
                None,
            ),
            (
                "nvidia-persistenced",
                {},
                {"usr/bin/nvidia-persistenced": (persistenced, 0o755)},
                None,
            ),
            (
                "nvidia-driver-cuda",
                {
                    "Depends": f"nvidia-smi (= {v}), libcuda1 (= {v}), nvidia-persistenced (>= "
                    f"{branch})"
                },
                {},
                None,
            )
            if shape == "split"
            else (
                "nvidia-driver-cuda",
                {
                    "Depends": f"nvidia-alternative (= {v})",
                    "Provides": ", ".join(f"{p} (= {v})" for p in PIECES),
                    "Conflicts": ", ".join(PIECES),
                    "Replaces": ", ".join(PIECES),
                },
                {
                    "usr/bin/nvidia-smi": (
                        _render("nvidia-smi", DRIVER_VERSION=ver, CUDA_VERSION=cuda),
                        0o755,
                    ),
                    "usr/bin/nvidia-persistenced": (persistenced, 0o755),
                    **{f"{LIBDIR}/{so}": (data, 0o644) for so, data in libs.items()},
                },
                "ldconfig\n",
            ),
        ]
        for name, fields, files, postinst in specs:
            build_deb(out, name, v, fields, files, postinst)


OLD_RUNTIME = "nvidia-container-runtime (<= 3.5.0-1), nvidia-container-runtime-hook"


def build_toolkit_repo(out: Path, work: Path) -> None:
    """The toolkit's four packages at the kit's pinned version and a newer one."""
    lib = stub_library("libnvidia-container.so.1", work)
    for v in TOOLKIT_VERSIONS:
        tool = {
            "usr/bin/nvidia-ctk": (_render("nvidia-ctk", TOOLKIT_VERSION=v), 0o755),
            "usr/bin/nvidia-container-runtime": (_render("nvidia-container-runtime"), 0o755),
        }
        specs = [
            (
                "nvidia-container-toolkit",
                {
                    # from v1.18.0 the tools dependency is (= V) (packaging/debian/control)
                    "Depends": f"nvidia-container-toolkit-base (= {v}), libnvidia-container-tools "
                    + (
                        f"(>= {v}), libnvidia-container-tools (<< 2.0.0)"
                        if v < "1.18"
                        else f"(= {v})"
                    ),
                    "Breaks": OLD_RUNTIME,
                    "Replaces": OLD_RUNTIME,
                },
                {
                    "usr/bin/nvidia-container-runtime-hook": (
                        _render("nvidia-container-runtime-hook"),
                        0o755,
                    )
                },
            ),
            (
                "nvidia-container-toolkit-base",
                {
                    "Breaks": f"{OLD_RUNTIME}, nvidia-container-toolkit (<= 1.10.0-1)",
                    "Replaces": OLD_RUNTIME,
                },
                tool,
            ),
            (
                "libnvidia-container-tools",
                {"Depends": f"libnvidia-container1 (>= {v})"},
                {
                    "usr/bin/nvidia-container-cli": (
                        _render("nvidia-container-cli", VERSION=v),
                        0o755,
                    )
                },
            ),
            ("libnvidia-container1", {}, {f"{LIBDIR}/libnvidia-container.so.1": (lib, 0o644)}),
        ]
        for name, fields, files in specs:
            build_deb(out, name, v, dict(fields, Section="utils"), files)


def unpackaged_driver(root: Path, version: str, cuda: str, work: Path) -> None:
    """A working driver that no package installed, laid out as the real sample
    (tests/data/nvidia-smi/h200-x1/unpackaged-driver-ubuntu2404.txt): programs in
    /usr/local/nvidia/bin, libraries in /usr/local/nvidia/lib64 known to ldconfig, already
    loaded."""
    base = root / "usr/local/nvidia"
    (base / "bin").mkdir(parents=True, exist_ok=True)
    (base / "lib64").mkdir(parents=True, exist_ok=True)
    (base / "bin/nvidia-smi").write_bytes(
        _render("nvidia-smi", DRIVER_VERSION=version, CUDA_VERSION=cuda)
    )
    (base / "bin/nvidia-persistenced").write_bytes(b"#!/bin/sh\nexit 0\n")
    for program in ("nvidia-smi", "nvidia-persistenced"):
        (base / "bin" / program).chmod(0o755)
    for so in ("libcuda.so.1", "libnvidia-ml.so.1"):
        (base / "lib64" / so).write_bytes(stub_library(so, work))
    (root / "etc/ld.so.conf.d/laguna-standin-nvidia.conf").write_text("/usr/local/nvidia/lib64\n")
    (root / "var/lib/standin-nvidia").mkdir(parents=True, exist_ok=True)
    (root / "var/lib/standin-nvidia/installed-in-boot").write_text("preinstalled\n")


def cuda_keyring(out: Path, repo: str, key: bytes, distro: str = "debian12") -> Path:
    """NVIDIA's cuda-keyring package as NVIDIA/apt-packaging-cuda-keyring builds it (its
    debian/templates: cuda-archive-keyring.gpg into /usr/share/keyrings, cuda-REPO.list.in into
    /etc/apt/sources.list.d as a conffile), for `repo` (the box's view of the stand-in
    repository, where the real one names developer.download.nvidia.com)."""
    line = f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {repo} /\n"
    listing = f"etc/apt/sources.list.d/cuda-{distro}-x86_64.list"
    return build_deb(
        out,
        "cuda-keyring",
        "1.1-1",
        {"Architecture": "all", "Section": "multiverse/devel"},
        {
            "usr/share/keyrings/cuda-archive-keyring.gpg": (key, 0o644),
            listing: (line.encode(), 0o644),
        },
        conffiles=(f"/{listing}",),
    )
