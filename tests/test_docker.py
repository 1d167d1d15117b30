"""tasks/docker.py on a harness box: converge, idempotence, daemon.json merge, a real container."""

import json
import shlex

DEPLOY = "tests/deploys/docker.py"


def test_docker_converges_and_second_run_changes_nothing(make_box, deploy, sandbox):
    b = make_box()
    first = deploy(b, DEPLOY)
    assert first.ok, first.explain()
    assert first.changed(b.name), "a bare box must need changes"
    # held: the kit installed it (see below)
    assert b.run("dpkg-query -W -f='${Status}' docker.io").stdout == "hold ok installed"
    assert b.run("systemctl is-active docker").stdout.strip() == "active"
    assert b.run("systemctl is-enabled docker").stdout.strip() == "enabled"
    cfg = json.loads(b.run("cat /etc/docker/daemon.json").stdout)
    assert cfg["storage-driver"] == "vfs"
    assert cfg["registry-mirrors"] == [sandbox.servers.urls(b)["registry_mirror"]]
    assert b.run("docker info --format '{{.Driver}}'").stdout.strip() == "vfs"
    # the engine the kit installed, and the runtime it brought, are held: an unattended upgrade
    # cannot restart the serving container behind the kit's back (no drain, no gate)
    held = set(b.run("apt-mark showhold").stdout.split())
    assert {"docker.io", "containerd", "runc"} <= held, held

    second = deploy(b, DEPLOY)
    assert second.ok, second.explain()
    assert second.changed() == [], f"second run changed: {second.changed()}"


def test_daemon_json_merge_keeps_keys_others_wrote(make_box, deploy):
    b = make_box()
    b.run(
        'mkdir -p /etc/docker && echo \'{"log-driver": "journald", "runtimes": {"x": {"path": '
        '"runc"}}}\''
        " > /etc/docker/daemon.json"
    )
    res = deploy(b, DEPLOY)
    assert res.ok, res.explain()
    cfg = json.loads(b.run("cat /etc/docker/daemon.json").stdout)
    assert cfg["log-driver"] == "journald" and cfg["runtimes"]["x"] == {"path": "runc"}
    assert cfg["storage-driver"] == "vfs"


def test_invalid_daemon_json_is_refused_not_overwritten(make_box, deploy):
    b = make_box()
    b.run("mkdir -p /etc/docker && echo '{broken' > /etc/docker/daemon.json")
    res = deploy(b, DEPLOY)
    assert not res.ok
    assert "is not valid JSON" in res.output
    assert b.run("cat /etc/docker/daemon.json").stdout.strip() == "{broken"


def test_standin_image_pulls_by_its_production_name_and_answers(make_box, deploy):
    b = make_box()
    assert deploy(b, DEPLOY).ok
    b.run("docker pull -q vllm/vllm-openai:v0.25.1", timeout=300)
    b.run("mkdir -p /models/m && echo '{}' > /models/m/config.json")
    b.run(
        "docker run -d --name probe --network host -v /models:/root/.cache/huggingface:ro "
        "vllm/vllm-openai:v0.25.1 /root/.cache/huggingface/m --served-model-name laguna "
        "--port 8080",
        timeout=300,
    )
    out = b.run(
        "for i in $(seq 60); do curl -sf localhost:8080/v1/models && exit 0; sleep 0.5; done; exit "
        "1",
        timeout=120,
    ).stdout
    assert json.loads(out)["data"][0]["id"] == "laguna"


def test_docker_ce_the_owner_installed_is_never_replaced(make_box, deploy):
    """Docker CE from Docker's repository is on the box (stand-ins with the real Conflicts): the
    kit must not install docker.io over it (apt would remove docker-ce); it uses the owner's
    engine, and refuses by name when that engine is not usable."""
    from tests.harness import standin_docker_ce

    b = make_box()
    debs = standin_docker_ce.build(b.root / "root/docker-ce")
    b.run(
        "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
        + " ".join(f"/root/docker-ce/{d.name}" for d in debs),
        timeout=300,
    )
    status = b.run("dpkg-query -W -f='${Status}' docker-ce", check=False).stdout
    assert status == "install ok installed", status
    # The harm is real: apt would remove Docker CE to install docker.io.
    sim = b.run("apt-get install -s docker.io", timeout=120).stdout
    assert "Remv docker-ce " in sim, sim
    res = deploy(b, "tests/deploys/docker.py")
    assert not res.ok
    assert (
        "the Docker engine on this box (docker-ce) is not usable: no docker.service" in res.output
    ), res.explain()
    # The kit's apt operation itself refuses an install that would remove a package.
    guard = deploy(b, "tests/deploys/apt_docker_io.py")
    assert not guard.ok
    refusal = [ln for ln in guard.output.splitlines() if "installing docker.io would remove" in ln]
    assert refusal and " docker-ce " in f" {refusal[0]} ", guard.explain()
    status = b.run("dpkg-query -W -f='${Status}' docker-ce docker.io", check=False).stdout
    assert status.startswith("install ok installed"), status
    assert "docker-ce" not in b.run("apt-mark showhold").stdout.split(), "the owner's is not held"
    assert (
        b.run("dpkg-query -W -f='${Status}' docker.io", check=False).stdout
        != "install ok installed"
    )


def test_a_dpkg_killed_mid_install_is_finished_by_the_next_run(make_box, deploy):
    """A run cut during a package's configure step (an SSH drop during the driver's DKMS build)
    leaves dpkg's journal behind; apt then refuses every install until `dpkg --configure -a`."""
    b = make_box()
    # A package whose postinst kills dpkg the first time, as a dropped session kills it.
    b.run(
        "set -e; d=/tmp/cut/DEBIAN; mkdir -p $d; printf '%s\\n' 'Package: laguna-cut-standin' "
        "'Version: 1.0' 'Architecture: all' 'Maintainer: harness <h@invalid>' "
        "'Description: STAND-IN a package whose configure step is cut' > $d/control; "
        "printf '%s\\n' '#!/bin/sh' '[ -e /var/tmp/cut-once ] && exit 0' "
        "'touch /var/tmp/cut-once; kill -9 $PPID' > $d/postinst; chmod 755 $d/postinst; "
        "dpkg-deb --root-owner-group --build /tmp/cut /tmp/cut.deb >/dev/null; "
        "dpkg -i /tmp/cut.deb || true",
        check=False,
    )
    refused = b.run("apt-get install -y docker.io", check=False)
    assert "dpkg was interrupted" in refused.stdout + refused.stderr, refused.stderr
    res = deploy(b, DEPLOY)
    assert res.ok, res.explain()
    assert "dpkg was interrupted" in res.output  # said, not hidden
    status = "dpkg-query -W -f='${Status}' laguna-cut-standin docker.io"
    assert b.run(status).stdout == "hold ok installedinstall ok installed"


HOLD_APT_LOCKS = (
    "import fcntl, time\n"
    "held = []\n"
    "for path in ('/var/lib/apt/lists/lock', '/var/lib/dpkg/lock-frontend',\n"
    "             '/var/lib/dpkg/lock'):\n"
    "    f = open(path, 'a')\n"
    "    fcntl.lockf(f, fcntl.LOCK_EX)\n"
    "    held.append(f)\n"
    "open('/run/apt-locks-held', 'w').close()\n"
    "time.sleep(15)\n"
)


def test_an_install_waits_for_another_apt_instead_of_failing(make_box, deploy):
    """Ubuntu's unattended-upgrades holds apt's and dpkg's locks for minutes after a first boot:
    the deploy waits for them (here a process holding them as apt does, with fcntl, for 15 s)."""
    b = make_box()
    b.run(f"systemd-run --unit=apt-lock-holder python3 -c {shlex.quote(HOLD_APT_LOCKS)}")
    b.run("for i in $(seq 50); do [ -e /run/apt-locks-held ] && break; sleep 0.1; done")
    busy = b.run("apt-get update -q", check=False)
    assert busy.returncode != 0 and "Could not get lock" in busy.stderr, busy.stderr
    res = deploy(b, DEPLOY)
    assert res.ok, res.explain()
    assert b.run("systemctl is-active apt-lock-holder", check=False).stdout.strip() != "active"
    # held: the kit installed it (see below)
    assert b.run("dpkg-query -W -f='${Status}' docker.io").stdout == "hold ok installed"
