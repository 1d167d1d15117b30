"""laguna_kit/operations/systemd.py beyond its fixtures: which unit a file belongs to, the links
an [Install] makes, and reactions read from the box alone (a file this run writes counts as
changed now)."""

import hashlib

from laguna_kit.operations.systemd import install_links, reactions, unit_of

U = "/etc/systemd/system"


def test_a_file_belongs_to_its_unit_or_is_configuration():
    assert unit_of(f"{U}/laguna-router.service") == "laguna-router.service"
    assert unit_of(f"{U}/prometheus.service.d/laguna-kit.conf") == "prometheus.service"
    assert unit_of("/etc/laguna-kit/haproxy.cfg") is None


def test_the_install_section_names_the_links():
    text = b"[Unit]\nDescription=x\n[Install]\nWantedBy=sysinit.target multi-user.target\n"
    assert install_links("f.service", text) == [
        f"{U}/multi-user.target.wants/f.service",
        f"{U}/sysinit.target.wants/f.service",
    ]
    assert install_links("f.service", b"[Service]\nExecStart=/bin/true\n") == []


def state(mtime, since, ndr=False, reloaded=0.0, data=b"x"):
    digest = hashlib.sha256(data).hexdigest()
    return {
        "files": {
            f"{U}/r.service": {"sha256": digest, "mode": "644", "mtime": mtime},
            "/etc/r.cfg": {"sha256": digest, "mode": "644", "mtime": mtime},
        },
        "units": {
            "r.service": {
                "loaded": True,
                "active": since is not None,
                "since": since,
                "need_daemon_reload": ndr,
            },
        },  # fmt: skip
        "links": [],
        "reloaded": {"r.service": reloaded} if reloaded else {},
    }


FILES = [(b"x", f"{U}/r.service", "644"), (b"x", "/etc/r.cfg", "644")]


def test_reactions_follow_the_files_age_against_the_units_start():
    assert reactions("r.service", FILES, state(1.0, 2.0), False, 9.0) == []
    assert reactions("r.service", FILES, state(3.0, 2.0, ndr=True), False, 9.0) == [
        "systemctl daemon-reload",
        "systemctl try-restart r.service",
    ]
    assert reactions("r.service", FILES, state(3.0, None, ndr=True), False, 9.0) == [
        "systemctl daemon-reload"
    ]  # not running: it starts with its files
    cfg_newer = state(1.0, 2.0)
    cfg_newer["files"]["/etc/r.cfg"]["mtime"] = 3.0
    reload = reactions("r.service", FILES, cfg_newer, True, 9.0)
    assert reload == [
        "systemctl reload r.service && install -d /run/laguna-kit/reloaded && "
        "touch /run/laguna-kit/reloaded/r.service"
    ]
    cfg_newer["reloaded"] = {"r.service": 4.0}
    assert reactions("r.service", FILES, cfg_newer, True, 9.0) == []
    written = [(b"new", f"{U}/r.service", "644"), (b"x", "/etc/r.cfg", "644")]
    assert reactions("r.service", written, state(1.0, 2.0), True, 9.0) == [
        "systemctl daemon-reload",
        "systemctl try-restart r.service",
    ]
