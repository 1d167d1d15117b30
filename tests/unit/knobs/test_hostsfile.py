"""laguna_kit/knobs/hostsfile.py: real boxes are described in TOML and mistakes are named before any
SSH."""

import pytest

from laguna_kit.knobs.hostsfile import HostsFileError, load


def write(tmp_path, text):
    p = tmp_path / "hosts.toml"
    p.write_text(text)
    return p


def test_bad_knob_stops_pyinfra_before_any_host_is_contacted(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from laguna_kit import KIT_ROOT

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
    key = tmp_path / "k"
    key.write_text("a key\n")
    hosts = load(
        write(
            tmp_path,
            f'[[hosts]]\nname="g1"\naddress="192.0.2.1"\nport=2222\nkey="{key}"\n'
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
            "ssh_key": str(key),
        },
    )
    assert hosts[1][0] == "192.0.2.2" and hosts[1][1]["ssh_port"] == 22


@pytest.mark.parametrize(
    "text, message",
    [
        ('[[hosts]]\naddress="a"\nprot=22\n', "unknown field 'prot'"),
        # issue 40: a port in the address passed, then "Could not resolve hostname"
        (
            '[[hosts]]\naddress="192.0.2.1:2222"\n',
            'a port is its own field: address = "192.0.2.1", port = 2222',
        ),
        ('[[hosts]]\naddress="fe80::1%eth0"\nname="v6"\nkey="/nonexistent/k"\n', "no such file"),
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

    from laguna_kit import KIT_ROOT

    assert (
        subprocess.run(
            [sys.executable, "scripts/render_docs.py", "--check"], cwd=KIT_ROOT
        ).returncode
        == 0
    ), "docs/reference.md is stale: run scripts/render_docs.py"


def test_roles_make_the_router_and_gpu_groups(tmp_path):
    from laguna_kit.knobs.hostsfile import of_role

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


def test_one_monitor_which_may_be_the_router(tmp_path):
    hosts = load(
        write(
            tmp_path,
            '[[hosts]]\naddress="192.0.2.1"\nroles=["router", "monitor"]\n'
            '[[hosts]]\naddress="192.0.2.2"\n',
        )
    )
    assert [d["laguna_roles"] for _, d in hosts] == [["router", "monitor"], ["gpu"]]
    with pytest.raises(HostsFileError, match="more than one host has the role 'monitor'"):
        load(
            write(
                tmp_path,
                '[[hosts]]\naddress="192.0.2.1"\nroles=["monitor"]\n'
                '[[hosts]]\naddress="192.0.2.2"\nroles=["gpu", "monitor"]\n',
            )
        )


def test_fleet_wide_data_reaches_every_host_and_a_host_table_wins(tmp_path):
    hosts = load(
        write(
            tmp_path,
            "[data]\nnvidia_allow_reboot = true\n"
            "serving_overrides = {gpu_memory_utilization = 0.86}\n"
            '[[hosts]]\nname="g1"\naddress="192.0.2.1"\n'
            '[[hosts]]\nname="g2"\naddress="192.0.2.2"\n'
            "[hosts.data]\nnvidia_allow_reboot = false\n",
        )
    )
    (_, g1), (_, g2) = hosts
    assert g1["nvidia_allow_reboot"] is True and g2["nvidia_allow_reboot"] is False
    assert g1["serving_overrides"] == g2["serving_overrides"] == {"gpu_memory_utilization": 0.86}


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '[data]\nnvidia_alow_reboot = true\n[[hosts]]\naddress="a"\n',
            "[data]: unknown knob 'nvidia_alow_reboot' in [data] (did you mean nvidia_allow_reboot",
        ),
        ('data = 3\n[[hosts]]\naddress="a"\n', "data must be a table"),
        ('[datas]\n[[hosts]]\naddress="a"\n', "unknown top-level keys ['datas']"),
        # The profile's own value points at the knob that changes it, not at a lookalike name.
        (
            '[[hosts]]\naddress="a"\n[hosts.data]\ngpu_memory_utilization = 0.86\n',
            "serving profile's value: set serving_overrides = {gpu_memory_utilization = ...}",
        ),
        ('[[hosts]]\naddress="a"\n[hosts.data]\ngpu_cont = 4\n', "(did you mean gpu_count?)"),
        (
            '[[hosts]]\naddress="a"\n[hosts.data]\nserving_overrides = {max_len = 1}\n',
            "has 'max_len', not a profile value",
        ),
        (
            '[[hosts]]\naddress="a"\n[hosts.data]\nserving_overrides = {max_num_seqs = "4"}\n',
            "max_num_seqs must be a number or None",
        ),
        (
            '[[hosts]]\naddress="a"\n[hosts.data]\n'
            "serving_overrides = {gpu_memory_utilization = 0.92}\n",
            "refusing serving_mode 'champion': gpu_memory_utilization 0.92 with DFlash",
        ),
        # pyinfra 3.10's SSH connector has no proxy-command field: the refusal names its way.
        ('[[hosts]]\naddress="a"\nssh_proxy_command="ssh -W %h:%p jump"\n', "set ssh_config_file"),
        ('[[hosts]]\naddress="a"\nssh_forward_agent="yes"\n', "ssh_forward_agent must be bool"),
        ('[[hosts]]\naddress="a"\nssh_key_pasword="x"\n', "(did you mean ssh_key_password"),
    ],
)
def test_fleet_data_and_connection_mistakes_are_named(tmp_path, text, message):
    with pytest.raises(HostsFileError) as exc:
        load(write(tmp_path, text))
    assert message in str(exc.value)


def test_a_password_in_the_wrong_shape_is_not_echoed(tmp_path):
    with pytest.raises(HostsFileError) as exc:
        load(write(tmp_path, '[[hosts]]\naddress="a"\nssh_key_password=123456789\n'))
    assert "123456789" not in str(exc.value) and "(hidden)" in str(exc.value)


def test_pyinfras_own_ssh_data_passes_through(tmp_path):
    """A rented box behind a jump host: ProxyJump in an ssh config pyinfra reads (its SSH client
    honours ProxyJump and ProxyCommand there), an agent forwarded, an encrypted key's password."""
    ((_, data),) = load(
        write(
            tmp_path,
            '[[hosts]]\nname="rented"\naddress="10.0.0.5"\nssh_config_file="~/jump.conf"\n'
            'ssh_forward_agent=true\nssh_key_password="pw"\nssh_connect_retries=3\n',
        )
    )
    import os

    assert data["ssh_config_file"] == os.path.expanduser("~/jump.conf")
    assert data["ssh_forward_agent"] is True and data["ssh_key_password"] == "pw"
    assert data["ssh_connect_retries"] == 3


def test_a_serving_override_changes_one_value_and_says_so():
    from laguna_kit.domain.profiles import render
    from laguna_kit.knobs.declared import defaults

    knobs = dict(defaults(), serving_overrides={"gpu_memory_utilization": 0.86})
    serving = render(knobs)
    args = serving.vllm_args
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.86"
    assert args[args.index("--max-num-seqs") + 1] == "4"  # the rest of the champion row kept
    assert any("gpu_memory_utilization=0.86 (the profile's 0.87)" in d for d in serving.derived)
    assert not any("serving_overrides" in d for d in render(defaults()).derived)


@pytest.mark.parametrize(
    "override, groups, message",
    [
        (
            {"serving_mod": "champion"},
            {},
            "--data: unknown knob 'serving_mod' (did you mean serving_mode?)",
        ),
        ({"api_port": "http"}, {}, "knob api_port = 'http'"),
        (
            {},
            {"gpu_boxes": {"nvidia_alow_reboot": True}},
            "group_data/gpu_boxes.py: unknown knob 'nvidia_alow_reboot' (did you mean "
            "nvidia_allow_reboot?)",
        ),
    ],
)
def test_data_outside_the_hosts_file_is_checked_by_every_entry_point(override, groups, message):
    """`pyinfra --data k=v` and group_data/<group>.py reach host.data without the hosts file's
    check; deploy.py and the tasks call check.refuse_bad first (before any operation)."""
    from pyinfra.api import Inventory
    from pyinfra.api.exceptions import DeployError

    from laguna_kit import KIT_ROOT
    from laguna_kit.knobs.check import refuse_bad
    from laguna_kit.knobs.declared import defaults

    names = ["box"]
    inventory = Inventory(
        (names, defaults()),
        override_data=override,
        **{g: (names, d) for g, d in groups.items()},
    )
    host = inventory.get_host("box")
    with pytest.raises(DeployError) as exc:
        refuse_bad(host)
    assert message in str(exc.value) and "nothing was changed" in str(exc.value)
    for entry in (
        "deploy.py",
        "tasks/rollback.py",
        "tasks/status.py",
        "tasks/logs.py",
        "tasks/stop.py",
    ):
        assert "refuse_bad(host)" in (KIT_ROOT / entry).read_text(), entry


def test_pyinfras_own_data_is_not_a_misspelt_knob():
    from pyinfra.api import Inventory

    from laguna_kit.knobs.check import refuse_bad
    from laguna_kit.knobs.declared import defaults

    inventory = Inventory(
        (["box"], defaults()),
        override_data={"ssh_user": "ops", "_sudo": True, "rollback_to": 3, "log_lines": 50},
    )
    refuse_bad(inventory.get_host("box"))


def test_the_hosts_file_is_laguna_hosts_then_the_checkouts_hosts_toml_then_the_sandbox(
    tmp_path,
):
    """Issue 40 #4: OPERATIONS' commands copied as written (no LAGUNA_HOSTS) read ./hosts.toml."""
    from laguna_kit.knobs import hostsfile

    sandbox = str(tmp_path / "sandbox.toml")
    assert hostsfile.default_path({}, str(tmp_path), sandbox) is None
    (tmp_path / "sandbox.toml").write_text("")
    assert hostsfile.default_path({}, str(tmp_path), sandbox) == sandbox
    (tmp_path / "hosts.toml").write_text("")
    assert hostsfile.default_path({}, str(tmp_path), sandbox) == str(tmp_path / "hosts.toml")
    mine = {"LAGUNA_HOSTS": "/elsewhere.toml"}
    assert hostsfile.default_path(mine, str(tmp_path), sandbox) == "/elsewhere.toml"


def test_a_hosts_file_saved_by_notepad_is_read(tmp_path):
    """Issue 40: a UTF-8 BOM and CRLF lines ended in "Invalid statement (at line 1, column 1)"."""
    path = tmp_path / "hosts.toml"
    path.write_bytes(b'\xef\xbb\xbf[[hosts]]\r\nname = "g1"\r\naddress = "192.0.2.1"\r\n')
    assert [name for name, _ in load(path)] == ["g1"]
    path.write_bytes(b'[[hosts]]\naddress = "caf\xe9"\n')
    with pytest.raises(HostsFileError, match="is not UTF-8 text"):
        load(path)


def test_a_limit_that_matches_no_host_is_named():
    """Issue 40: `--limit gpu-01` with a host named gpu-1 planned nothing, then asked to go on."""
    from laguna_kit.knobs.hostsfile import unmatched_limits

    names, groups = ["gpu-1", "gpu-2", "rt"], {"gpu_boxes": [], "routers": []}
    argv = ["pyinfra", "--limit", "gpu-01", "--limit=rt", "inventory.py", "deploy.py"]
    assert unmatched_limits(argv, names, groups) == ["gpu-01"]
    assert unmatched_limits(["pyinfra", "--limit", "gpu-*,routers"], names, groups) == []
    assert unmatched_limits(["pyinfra", "inventory.py", "deploy.py"], names, groups) == []
