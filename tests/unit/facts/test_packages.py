"""facts/packages.py's files_naming: the owner's source files naming a repository the kit would
add (one-line or deb822), its own files left out."""

from laguna_kit.facts.packages import files_naming

SOURCES = {
    "/etc/apt/sources.list.d/tailscale.sources": ["https://pkgs.tailscale.com/stable/debian"],
    "/etc/apt/sources.list.d/tailscale.list": ["https://pkgs.tailscale.com/stable/debian"],
    "/etc/apt/sources.list.d/debian.sources": ["https://deb.debian.org/debian"],
    "/etc/apt/sources.list.d/other.list": ["https://pkgs.tailscale.com/stable/debianx"],
}


def test_the_owners_files_naming_the_repository_not_the_kits_own():
    repo = "https://pkgs.tailscale.com/stable/debian/"
    assert files_naming(SOURCES, repo, but=("/etc/apt/sources.list.d/tailscale.list",)) == [
        "/etc/apt/sources.list.d/tailscale.sources"
    ]
    assert files_naming(SOURCES, "https://example.org/x") == []
