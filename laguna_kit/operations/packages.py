"""Debian/Ubuntu packages: installed only when missing, held when asked."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import operation
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.server import Command

APT_ENV = "DEBIAN_FRONTEND=noninteractive"
APT_INSTALL = (
    "apt-get install -y -q --no-install-recommends "
    "-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold"
)


def missing(packages: list[str], installed: dict) -> list[str]:
    """Packages (optionally `name=version`) not installed at the wanted version."""
    out = []
    for spec in packages:
        name, _, version = spec.partition("=")
        if name not in installed or (version and version not in installed[name]):
            out.append(spec)
    return out


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

    + packages: names, or ``name=version`` to want that exact version
    + hold: ``apt-mark hold`` them, so unattended upgrades cannot swap a driver or runtime under
      running GPU containers

    **Example:**

    .. code:: python

        apt_present(name="Toolkit", packages=["nvidia-container-toolkit=1.17.8-1"], hold=True)
    """
    todo = missing(packages, host.get_fact(DebPackages))
    if todo:
        yield f"{APT_ENV} apt-get update -q"
        yield no_removals(todo)
        yield f"{APT_ENV} {APT_INSTALL} {' '.join(todo)}"
    if hold:
        names = [p.partition("=")[0] for p in packages]
        held = set((host.get_fact(Command, command="apt-mark showhold") or "").split())
        unheld = [n for n in names if n not in held]
        if unheld:
            yield f"apt-mark hold {' '.join(unheld)}"
    if not todo and not hold:
        host.noop(f"installed: {', '.join(packages)}")
