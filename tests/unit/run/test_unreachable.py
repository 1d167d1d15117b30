"""laguna_kit/run/unreachable.py: a host pyinfra never connected to is named with its address,
port and the login to try; a host that connected and failed later is not."""

from types import SimpleNamespace

from laguna_kit.run import unreachable


class Host:  # hashable, as pyinfra's hosts are
    def __init__(self, name, **data):
        self.name, self.data = name, data


host = Host


def test_only_hosts_never_connected_get_the_advice_with_their_own_login():
    far = host("gpu-2", ssh_hostname="192.0.2.11", ssh_port=40022, ssh_user="ops", ssh_key="/k")
    failed_later = host("gpu-1", ssh_hostname="192.0.2.10")
    state = SimpleNamespace(failed_hosts={far, failed_later}, activated_hosts={failed_later})
    assert unreachable.never_connected(state) == [far]
    said = unreachable.advice(far)
    assert "gpu-2: no SSH connection to ops@192.0.2.11 port 40022" in said
    assert "`ssh -p 40022 -i /k ops@192.0.2.11 true`" in said and "known_hosts" in said
    jump = unreachable.advice(host("g", ssh_hostname="10.0.0.5", ssh_config_file="/cfg"))
    assert "`ssh -p 22 -F /cfg root@10.0.0.5 true`" in jump
