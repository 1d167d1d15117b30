"""The control machine needs no root: a venv with requirements.txt, as any user. The kit's own
control-side code (the hosts file, every knob check, deploy.py's planning up to the first SSH
connection, the client scripts) runs as an unprivileged user with a HOME of its own and writes
nothing outside it. (scripts/setup.sh is the harness's installer: debootstrap and the rest.)"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from laguna_kit import KIT_ROOT

VENV_BIN = Path(sys.executable).parent


@pytest.fixture
def user_dir():
    """A folder the ordinary user can read (pytest's own tmp folders are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="laguna-user-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_a_user(tmp_path):
    """A command prefix and environment for an ordinary user: `nobody` when the suite runs as
    root (CI), else the user running it (a laptop)."""
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o777)
    env = {
        "HOME": str(home),
        "PATH": f"{VENV_BIN}:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    prefix = []
    if os.geteuid() == 0:
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    return prefix, env, home


def test_a_deploy_runs_as_an_ordinary_user_up_to_the_connection(user_dir):
    prefix, env, home = as_a_user(user_dir)
    hosts = user_dir / "hosts.toml"
    hosts.write_text('[[hosts]]\nname = "gpu-1"\naddress = "127.0.0.1"\nport = 9\n')
    hosts.chmod(0o644)
    proc = subprocess.run(
        [*prefix, str(VENV_BIN / "pyinfra"), "-y", "inventory.py", "deploy.py"],
        cwd=KIT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(env, LAGUNA_HOSTS=str(hosts)),
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    # It got as far as SSH (nothing listens on port 9), with no permission problem on the way.
    assert "Could not connect" in out, out[-2000:]
    # and what to check (laguna_kit/run/unreachable.py): the address, the port, the login to try
    assert "gpu-1: no SSH connection to root@127.0.0.1 port 9" in out, out[-2000:]
    assert "`ssh -p 9 root@127.0.0.1 true`" in out
    assert "Permission denied" not in out and "PermissionError" not in out, out[-2000:]
    leftovers = [p for p in user_dir.iterdir() if p.name not in ("home", "hosts.toml")]
    assert leftovers == []


def test_an_unreadable_hosts_file_is_named_not_a_traceback(user_dir):
    from laguna_kit.knobs.hostsfile import HostsFileError, load

    hosts = user_dir / "hosts.toml"
    hosts.write_text("[[hosts]]\n")
    hosts.chmod(0o600)
    prefix, env, _ = as_a_user(user_dir)
    if not prefix:
        with pytest.raises(HostsFileError):
            load(user_dir / "missing" / "hosts.toml")
        return
    proc = subprocess.run(
        [
            *prefix,
            sys.executable,
            "-c",
            f"from laguna_kit.knobs.hostsfile import load; load({str(hosts)!r})",
        ],
        cwd=KIT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert "HostsFileError" in proc.stderr and "Permission denied" in proc.stderr
    assert HostsFileError


def test_the_client_scripts_run_as_an_ordinary_user(user_dir):
    prefix, env, _ = as_a_user(user_dir)
    for script in ("smoke_test.py", "long_context_gate.py", "benchmark.py", "print_command.py"):
        proc = subprocess.run(
            [*prefix, sys.executable, str(KIT_ROOT / "scripts" / script), "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert proc.returncode == 0, (script, proc.stderr[-1500:])
        assert "usage" in proc.stdout.lower()


def test_deployment_md_sets_up_the_control_machine_without_root():
    text = (KIT_ROOT / "DEPLOYMENT.md").read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "python3 -m venv .venv" in quick and "-r requirements.txt" in quick
    setup = quick.split("```sh\n", 1)[1].split("```", 1)[0]
    assert not [line for line in setup.splitlines() if line.lstrip().startswith("sudo")]
    assert "python3 -m venv .venv" in setup
