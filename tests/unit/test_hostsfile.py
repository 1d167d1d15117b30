"""laguna_kit/hostsfile.py: real boxes are described in TOML and mistakes are named before any
SSH."""

import pytest

from laguna_kit.hostsfile import HostsFileError, load


def write(tmp_path, text):
    p = tmp_path / "hosts.toml"
    p.write_text(text)
    return p


def test_bad_knob_stops_pyinfra_before_any_host_is_contacted(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from laguna_kit.settings import KIT_ROOT

    hosts = write(
        tmp_path, '[[hosts]]\naddress="192.0.2.1"\n[hosts.data]\nserving_mod="champion"\n'
    )
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("pyinfra")), "-y", "inventory.py", "deploy.py"],
        cwd=KIT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, LAGUNA_HOSTS=str(hosts)),
    )
    assert proc.returncode != 0
    assert "unknown knob 'serving_mod'" in proc.stdout + proc.stderr
    assert "Connected" not in proc.stdout + proc.stderr


def test_hosts_with_connection_and_data(tmp_path):
    hosts = load(
        write(
            tmp_path,
            '[[hosts]]\nname="g1"\naddress="192.0.2.1"\nport=2222\nkey="/k"\n'
            '[hosts.data]\nnvidia_allow_reboot=true\n\n[[hosts]]\naddress="192.0.2.2"\n',
        )
    )
    assert hosts[0] == (
        "g1",
        {
            "nvidia_allow_reboot": True,
            "laguna_roles": ["gpu"],
            "ssh_hostname": "192.0.2.1",
            "ssh_user": "root",
            "ssh_port": 2222,
            "ssh_key": "/k",
        },
    )
    assert hosts[1][0] == "192.0.2.2" and hosts[1][1]["ssh_port"] == 22


@pytest.mark.parametrize(
    "text, message",
    [
        ('[[hosts]]\naddress="a"\nprot=22\n', "unknown field 'prot'"),
        ('[[hosts]]\naddress="a"\nport="22"\n', "port must be int"),
        ('[[hosts]]\nname="x"\n', "missing 'address'"),
        ('[[hosts]]\naddress="a"\n[[hosts]]\naddress="a"\n', "duplicate host name 'a'"),
        ("hosts = 3\n", "no [[hosts]]"),
        ("[[hosts]\n", "not valid TOML"),
        (
            '[[hosts]]\naddress="a"\n[hosts.data]\nnvidia_alow_reboot=true\n',
            "unknown knob 'nvidia_alow_reboot' in [hosts.data] (did you mean nvidia_allow_reboot",
        ),
        (
            '[[hosts]]\naddress="a"\n[hosts.data]\napi_port="8080"\n',
            "knob api_port must be int like its default",
        ),
        (
            '[[hosts]]\naddress="a"\n[hosts.data]\nnvidia_allow_reboot=1\n',
            "knob nvidia_allow_reboot must be bool",
        ),
        (
            '[[hosts]]\naddress="a"\n[hosts.data]\nserving_mode="turbo"\n',
            "serving_mode 'turbo' is not a profile; choose one of champion, context-first, "
            "speed-128k",
        ),
        (
            '[[hosts]]\naddress="a"\n[hosts.data]\ncontainer_extra_env={VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS="0"}\n',
            "CUDA-graph memory estimate",
        ),
    ],
)
def test_mistakes_are_named(tmp_path, text, message):
    with pytest.raises(HostsFileError) as exc:
        load(write(tmp_path, text))
    assert message in str(exc.value)


def test_deployment_md_knob_table_is_current():
    import subprocess
    import sys

    from laguna_kit.settings import KIT_ROOT

    assert (
        subprocess.run(
            [sys.executable, "scripts/render_docs.py", "--check"], cwd=KIT_ROOT
        ).returncode
        == 0
    ), "DEPLOYMENT.md is stale: run scripts/render_docs.py"


def test_roles_make_the_router_and_gpu_groups(tmp_path):
    from laguna_kit.hostsfile import of_role

    hosts = load(
        write(
            tmp_path,
            '[[hosts]]\nname="g1"\naddress="192.0.2.1"\n'
            '[[hosts]]\nname="g2"\naddress="192.0.2.2"\nroles=["gpu", "router"]\n'
            '[[hosts]]\nname="g3"\naddress="192.0.2.3"\n',
        )
    )
    assert [n for n, _ in of_role(hosts, "gpu")] == ["g1", "g2", "g3"]
    assert [n for n, _ in of_role(hosts, "router")] == ["g2"]
    hosts = load(write(tmp_path, '[[hosts]]\nname="r"\naddress="192.0.2.9"\nroles=["router"]\n'))
    assert of_role(hosts, "gpu") == [] and [n for n, _ in of_role(hosts, "router")] == ["r"]


@pytest.mark.parametrize(
    "roles, why",
    [
        ('["gpus"]', "roles must be a non-empty list"),
        ("[]", "roles must be a non-empty list"),
        ('["gpu", "gpu"]', "roles must be a non-empty list"),
    ],
)
def test_bad_roles_are_named(tmp_path, roles, why):
    with pytest.raises(HostsFileError, match=why):
        load(write(tmp_path, f'[[hosts]]\naddress="192.0.2.1"\nroles={roles}\n'))


def test_two_routers_are_refused(tmp_path):
    with pytest.raises(HostsFileError, match="more than one host has the role 'router'"):
        load(
            write(
                tmp_path,
                '[[hosts]]\naddress="192.0.2.1"\nroles=["router"]\n'
                '[[hosts]]\naddress="192.0.2.2"\nroles=["gpu", "router"]\n',
            )
        )
