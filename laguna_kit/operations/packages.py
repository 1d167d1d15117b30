"""Debian/Ubuntu packages: installed only when missing, held when asked; a venv's pins."""

from __future__ import annotations

import re
import shlex

from pyinfra import host, logger
from pyinfra.api import operation
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.server import Command

from ..facts.packages import VenvPackages, canonical
from ..run import memo

APT_ENV = "DEBIAN_FRONTEND=noninteractive"
# Another apt or dpkg (Ubuntu's unattended-upgrades holds the locks for minutes after a first
# boot; another operator's first deploy) is waited for, up to APT_LOCK_WAIT_S, not failed on.
# apt >= 1.9.11 waits for dpkg's lock itself (DPkg::Lock::Timeout); `apt-get update` does not
# for its lists lock, so it is tried again while apt says "Could not get lock".
APT_LOCK_WAIT_S = 600
APT_INSTALL = (
    f"apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout={APT_LOCK_WAIT_S} "
    "-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold"
)
APT_UPDATE = (
    f"n=0; until out=$({APT_ENV} apt-get update -q 2>&1); do "
    'case "$out" in *"Could not get lock"*) ;; *) echo "$out" >&2; exit 100;; esac; '
    f'n=$((n + 1)); if [ $n -ge {APT_LOCK_WAIT_S // 5} ]; then echo "$out" >&2; exit 100; fi; '
    "sleep 5; done"
)


def missing(packages: list[str], installed: dict) -> list[str]:
    """Packages (optionally `name=version`) not installed at the wanted version."""
    out = []
    for spec in packages:
        name, _, version = spec.partition("=")
        if name not in installed or (version and version not in installed[name]):
            out.append(spec)
    return out


# apt refuses to install anything while dpkg's journal holds an all-digit entry ("dpkg was
# interrupted, you must manually run 'dpkg --configure -a'": apt-pkg's debSystem CheckUpdates).
# A run cut during a configure step (an SSH drop during the driver's DKMS build) leaves one: the
# next run finishes that work first, as apt asks and as PackageKit's apt backend does.
DPKG_JOURNAL = "ls /var/lib/dpkg/updates 2>/dev/null | grep -x '[0-9][0-9]*' || true"
FINISH_INTERRUPTED = (  # unless a dpkg is running now: then the journal is its own
    "grep -qsx dpkg /proc/[0-9]*/comm || "
    f"{APT_ENV} dpkg --configure -a --force-confdef --force-confold"
)


def no_removals(todo: list[str]) -> str:
    """A command that fails, naming them, when installing `todo` would make apt remove packages
    (a Conflicts with something the owner installed): the kit never lets apt remove anything."""
    pkgs = " ".join(todo)
    return (
        f"rm=$({APT_ENV} {APT_INSTALL} -s {pkgs} 2>/dev/null | sed -n 's/^Remv \\([^ "
        f"]*\\).*/\\1/p' "
        f"| tr '\\n' ' '); if [ -n \"$rm\" ]; then echo \"laguna: installing {pkgs} would remove "
        '$rm(installed on this box): refusing; nothing was changed" >&2; exit 1; fi'
    )


@operation()
def apt_present(packages: list[str], hold: bool = False):
    """
    Install what is missing, refreshing the index only then, so a converged box runs nothing.
    A dpkg run that was cut (its journal left behind) is finished first.

    + packages: names, or ``name=version`` to want that exact version
    + hold: ``apt-mark hold`` them, so unattended upgrades cannot swap a driver or runtime under
      running GPU containers

    **Example:**

    .. code:: python

        apt_present(name="Toolkit", packages=["nvidia-container-toolkit=1.17.8-1"], hold=True)
    """
    todo = missing(packages, memo.fact(host, DebPackages))
    unheld = []
    if hold:  # read before the install: remembered facts are read before an operation's commands
        held = set((memo.fact(host, Command, command="apt-mark showhold") or "").split())
        unheld = [n for n in (p.partition("=")[0] for p in packages) if n not in held]
    journal: str = memo.fact(host, Command, command=DPKG_JOURNAL) if todo else ""
    if journal:
        logger.warning(
            f"{host.name}: dpkg was interrupted (a run cut mid-install?): finishing its work "
            "with dpkg --configure -a before installing"
        )
        yield FINISH_INTERRUPTED
    if todo:
        yield APT_UPDATE
        yield no_removals(todo)
        yield f"{APT_ENV} {APT_INSTALL} {' '.join(todo)}"
    if unheld:
        yield f"apt-mark hold {' '.join(unheld)}"
    if not todo and not hold:
        host.noop(f"installed: {', '.join(packages)}")


@operation()
def command_package_present(command: str, package: str, present: bool, hold: bool = False):
    """
    `command` on the box: where it is missing and the release ships `package` (a part another
    package only Recommends, such as Debian 13's docker-cli beside docker.io), that package is
    installed; where the release has no such package, nothing is done (the command comes with
    another one there).

    + command: the executable looked for on the PATH
    + package: the package that brings it where the release packages it apart
    + present: whether `command` is on the box now (read by a fact the caller already has)
    + hold: ``apt-mark hold`` it (with an engine the kit installed and holds)

    **Example:**

    .. code:: python

        command_package_present(
            name="docker", command="docker", package="docker-cli", present=False, hold=True
        )
    """
    if present:
        host.noop(f"{command} is on the box")
        return
    script = [
        f"if command -v {command} >/dev/null || ! apt-cache show {package} >/dev/null 2>&1; "
        "then exit 0; fi",
        no_removals([package]),
        f"{APT_ENV} {APT_INSTALL} {package}",
        *([f"apt-mark hold {package}"] if hold else []),
    ]
    yield "\n".join(script)


@operation()
def venv_packages(venv: str, packages: list[str], install_args: str = ""):
    """
    A venv (``python3 -m venv``) holding `packages` at their pinned versions; judged by one
    command that starts the venv's Python once (``pip freeze`` takes ten times as long).

    + venv: the venv's folder
    + packages: ``name==version`` pins
    + install_args: extra ``pip install`` arguments (``--index-url ...``)

    **Example:**

    .. code:: python

        venv_packages(name="Tools venv", venv="/opt/laguna-kit/venv",
                      packages=["huggingface_hub==2.4.0"])
    """
    have = host.get_fact(VenvPackages, venv=venv)
    todo = []
    for spec in packages:
        name, _, version = spec.partition("==")
        if (have or {}).get(canonical(name)) != version:
            todo.append(spec)
    q = shlex.quote(venv)
    if have is None:
        yield f"python3 -m venv {q}"
    if todo:
        args = f" {install_args}" if install_args else ""
        yield f"{q}/bin/pip install{args} " + shlex.join(todo)
    if have is not None and not todo:
        host.noop(f"{venv}: {', '.join(packages)}")


@operation()
def packages_held(packages: list[str], same_version_as: str = "", family: str = ""):
    """
    ``apt-mark hold`` what dpkg actually installed: the named packages that are installed, and
    every installed package whose name matches `family` at the version `same_version_as` has (a
    driver's pieces share its version, whether the repository splits them into packages of their
    own or one package provides them). Nothing is installed here.

    + packages: names to hold when installed
    + same_version_as: a package whose installed version the others are matched by
    + family: a regular expression the names matched by version must fit

    **Example:**

    .. code:: python

        packages_held(name="Driver held", packages=["nvidia-driver-cuda"],
                      same_version_as="nvidia-driver-cuda", family=r"nvidia-.*")
    """
    installed = memo.fact(host, DebPackages)
    held = set((memo.fact(host, Command, command="apt-mark showhold") or "").split())
    want = {name for name in packages if name in installed}
    versions = set(installed.get(same_version_as) or []) if same_version_as else set()
    if versions and family:
        want |= {
            name
            for name, vs in installed.items()
            if re.fullmatch(family, name) and versions & set(vs)
        }
    todo = sorted(want - held)
    if not todo:
        host.noop(f"held: {', '.join(sorted(want))}" if want else "nothing installed yet to hold")
        return
    yield "apt-mark hold " + shlex.join(todo)
