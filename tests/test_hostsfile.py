"""laguna_kit/hostsfile.py: real boxes are described in TOML and mistakes are named before any SSH."""

import pytest

from laguna_kit.hostsfile import HostsFileError, load


def write(tmp_path, text):
    p = tmp_path / "hosts.toml"
    p.write_text(text)
    return p


def test_hosts_with_connection_and_data(tmp_path):
    hosts = load(write(tmp_path, '[[hosts]]\nname="g1"\naddress="192.0.2.1"\nport=2222\nkey="/k"\n'
                                 '[hosts.data]\nnvidia_allow_reboot=true\n\n[[hosts]]\naddress="192.0.2.2"\n'))
    assert hosts[0] == ("g1", {"nvidia_allow_reboot": True, "ssh_hostname": "192.0.2.1", "ssh_user": "root",
                               "ssh_port": 2222, "ssh_key": "/k"})
    assert hosts[1][0] == "192.0.2.2" and hosts[1][1]["ssh_port"] == 22


@pytest.mark.parametrize("text, message", [
    ('[[hosts]]\naddress="a"\nprot=22\n', "unknown field 'prot'"),
    ('[[hosts]]\naddress="a"\nport="22"\n', "port must be int"),
    ('[[hosts]]\nname="x"\n', "missing 'address'"),
    ('[[hosts]]\naddress="a"\n[[hosts]]\naddress="a"\n', "duplicate host name 'a'"),
    ('hosts = 3\n', "no [[hosts]]"),
    ('[[hosts]\n', "not valid TOML"),
])
def test_mistakes_are_named(tmp_path, text, message):
    with pytest.raises(HostsFileError) as exc:
        load(write(tmp_path, text))
    assert message in str(exc.value)


def test_deployment_md_knob_table_is_current():
    import subprocess
    import sys
    from laguna_kit.settings import KIT_ROOT
    assert subprocess.run([sys.executable, "scripts/render_docs.py", "--check"], cwd=KIT_ROOT).returncode == 0, \
        "DEPLOYMENT.md is stale: run scripts/render_docs.py"
