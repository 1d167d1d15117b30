"""A newcomer's path on Debian 13, the current stable release (issues 39 and 40).

An ordinary user's control machine (uid 65534 under this root suite, a HOME of its own) set up
from a fresh clone exactly as DEPLOYMENT.md's Quick start says, its commands copied from the file
by the test; `hosts.toml` in the checkout made from hosts.example.toml's first host (the address,
port and key of a bare trixie box, the lab's mirrors, here the harness's stand-ins, added to its
[hosts.data]); then the documented commands typed at a terminal without -y: the first deploy, the
converged re-run (no change on any operation), status, an upgrade (a knob changed in hosts.toml)
and a rollback. The box is Debian 13 as its installer leaves it: deb822 apt sources, systemd 257,
nftables 1.1, Docker 26, python3 3.13 (tests/harness/rootfs.py)."""

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from laguna_kit import KIT_ROOT
from tests.harness import box as boxmod
from tests.harness.deployrun import result_of, typed
from tests.harness.sandbox import _toml_value

USER = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def section(doc: str, heading: str) -> str:
    text = (KIT_ROOT / doc).read_text()
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def documented(doc: str, heading: str, pattern: str) -> str:
    """The first backticked command of `doc`'s section that matches `pattern`, as written."""
    found = [c for c in re.findall(r"`([^`\n]+)`", section(doc, heading)) if re.search(pattern, c)]
    assert found, f"{doc}, {heading}: no command matching {pattern}"
    return found[0]


def operations_command(what: str) -> str:
    """The command OPERATIONS.md's table gives for the row whose "what" starts with `what`."""
    table = (KIT_ROOT / "OPERATIONS.md").read_text()
    found = re.search(rf"(?m)^\| {re.escape(what)}[^|]*\| `([^`]+)`", table)
    assert found, f"OPERATIONS.md: no row {what!r}"
    return found.group(1)


def quick_start_setup() -> str:
    """Quick start's first shell block (clone, venv, requirements), the repository filled in."""
    block = section("DEPLOYMENT.md", "Quick start").split("```sh\n", 1)[1].split("```", 1)[0]
    assert "<this repository>" in block and "python3 -m venv .venv" in block
    return "\n".join(line.strip() for line in block.splitlines()).replace(
        "<this repository>", str(KIT_ROOT)
    )


def first_example_host(b, mirrors: dict) -> str:
    """hosts.example.toml's first [[hosts]] table, pointed at box `b`, with `mirrors` added to its
    [hosts.data] (the table ends with it)."""
    example = (KIT_ROOT / "hosts.example.toml").read_text()
    table = "[[hosts]]" + example.split("[[hosts]]")[1].rstrip() + "\n"
    table = re.sub(r'(?m)^address = "[^"]*"', f'address = "{b.address}"', table)
    table = re.sub(r"(?m)^port = \d+", f"port = {b.ssh_port}", table)
    assert 'key = "~/.ssh/id_ed25519"' in table and "[hosts.data]" in table, table
    return table + "".join(f"{k} = {_toml_value(v)}\n" for k, v in mirrors.items())


@pytest.fixture(scope="module")
def newcomer(sandbox):
    base = Path(tempfile.mkdtemp(prefix="laguna-newcomer-"))
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    shutil.copy(boxmod.harness_ssh_key(), home / ".ssh" / "id_ed25519")
    # the kit's repository here belongs to root; git clones another user's only when told to
    (home / ".gitconfig").write_text("[safe]\n\tdirectory = *\n")
    subprocess.run(["chown", "-R", "65534:65534", str(base)], check=True)
    (home / ".ssh").chmod(0o700)
    (home / ".ssh" / "id_ed25519").chmod(0o600)
    env = {
        "HOME": str(home),
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        **sandbox.env(),  # Quick start's step 2: the keys exported in the deploying shell
    }
    b = sandbox.add_box("nc1", suite="trixie")
    setup = subprocess.run(
        [*USER, "bash", "-euo", "pipefail", "-c", quick_start_setup()],
        cwd=base,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert setup.returncode == 0, setup.stdout[-2000:] + setup.stderr[-3000:]
    checkout = base / "laguna-kit"
    mirrors = {k: v for k, v in sandbox.host_data(b).items() if k != "nvidia_allow_reboot"}
    hosts = checkout / "hosts.toml"
    hosts.write_text(first_example_host(b, mirrors))
    subprocess.run(["chown", "65534:65534", str(hosts)], check=True)
    yield b, checkout, env
    sandbox.remove_box(b)
    shutil.rmtree(base, ignore_errors=True)


def type_in(newcomer, command: str, timeout: float = 1500):
    _, checkout, env = newcomer
    res, prompts = typed([*USER, "bash", "-c", command], checkout, env, timeout)
    assert "Traceback" not in res.output, res.output[-4000:]
    return res, prompts


def current_release(b) -> int:
    return json.loads(b.run("cat /opt/laguna-kit/releases/state.json").stdout)["current"]


def test_the_first_deploy_typed_from_the_tutorial_serves_debian_13(newcomer):
    b, _, _ = newcomer
    assert b.run(". /etc/os-release; echo $VERSION_ID").stdout.strip() == "13"
    command = documented("DEPLOYMENT.md", "Quick start", r"pyinfra .*deploy\.py$")
    res, prompts = type_in(newcomer, command)
    assert res.ok, res.output[-5000:]
    assert prompts >= 1  # pyinfra asked before it executed, and Enter went on
    models = json.loads(b.run("curl -sf http://127.0.0.1:8080/v1/models").stdout)
    assert models["data"][0]["id"] == "laguna"
    assert json.loads(b.run("cat /opt/laguna-kit/state/last-gate.json").stdout)["passed"]
    # trixie's own sources stay deb822 and as they were; the kit's sit beside them
    assert b.run("test -f /etc/apt/sources.list.d/debian.sources && echo ok").stdout.strip()


def test_the_converged_re_run_changes_nothing(newcomer):
    _, checkout, env = newcomer
    proc = subprocess.run(
        [*USER, ".venv/bin/pyinfra", "-y", "--json", "inventory.py", "deploy.py"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    again = result_of(proc.returncode, proc.stdout, proc.stderr)
    assert again.ok, again.explain()
    assert again.changed() == [], again.changed()


def test_status_upgrade_and_rollback_as_operations_md_writes_them(newcomer):
    b, checkout, _ = newcomer
    res, prompts = type_in(newcomer, operations_command("status"), timeout=300)
    assert res.ok and prompts == 0, res.output[-3000:]  # a read-only task asks nothing with -y
    # the fleet's table: the box's row (host, replica, release, mode, health, ... last gate)
    row = re.search(r"(?m)^gpu-1\s+1\s+1\s+champion\s+.*$", res.output)
    assert row and "passed" in row.group(0), res.output[-3000:]

    # An upgrade: a knob the reference shows, set in the hosts file; a new release, gated.
    hosts = checkout / "hosts.toml"
    hosts.write_text(hosts.read_text() + "serving_overrides = {gpu_memory_utilization = 0.86}\n")
    res, _ = type_in(newcomer, operations_command("upgrade"))
    assert res.ok, res.output[-5000:]
    assert current_release(b) == 2

    res, _ = type_in(newcomer, operations_command("roll back to the previous release"))
    assert res.ok, res.output[-5000:]
    assert current_release(b) == 1
    models = json.loads(b.run("curl -sf http://127.0.0.1:8080/v1/models").stdout)
    assert models["data"][0]["id"] == "laguna"
