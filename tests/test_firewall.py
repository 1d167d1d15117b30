"""tasks/tailscale.py and tasks/firewall.py with real packets: the API answers over the tailnet only,
SSH keeps working, IPv4 and IPv6, a re-run changes nothing, and the rules survive a reboot."""

import json
import time

import pytest

from tests.harness import box as boxmod


def curl_from(ns, url, timeout=3):
    """curl run in network namespace `ns` (None: this machine); returns the HTTP body or None."""
    cmd = ["curl", "-sf", "-m", str(timeout), url]
    proc = boxmod.sh("ip", "netns", "exec", ns, *cmd, check=False) if ns else boxmod.sh(*cmd, check=False)
    return proc.stdout if proc.returncode == 0 else None


def ssh_works(b) -> bool:
    import subprocess
    try:
        return b.run("true", check=False, timeout=5).returncode == 0
    except subprocess.TimeoutExpired:
        return False


@pytest.fixture(scope="module")
def guarded(sandbox):
    from tests.harness.deployrun import run_deploy
    b = sandbox.add_box()
    res = run_deploy(sandbox, [b])
    assert res.ok, res.explain()
    yield b
    sandbox.remove_box(b)


def assert_tailnet_only(b):
    tailnet = boxmod.TAILNET_NS
    assert json.loads(curl_from(tailnet, f"http://{b.tailnet_v4}:8080/v1/models"))["data"][0]["id"] == "laguna"
    assert json.loads(curl_from(tailnet, f"http://[{b.tailnet_v6}]:8080/v1/models"))["data"][0]["id"] == "laguna"
    assert curl_from(None, f"http://{b.address}:8080/v1/models") is None, "API reachable off the tailnet (IPv4)"
    assert curl_from(None, f"http://[{b.address6}]:8080/v1/models") is None, "API reachable off the tailnet (IPv6)"
    assert b.run("hostname").stdout.strip() == b.name, "SSH on the ordinary interface must keep working"


def test_api_answers_on_the_tailnet_only(guarded):
    b = guarded
    assert b.run("tailscale ip -4").stdout.strip() == b.tailnet_v4
    assert_tailnet_only(b)
    # The drop is in the kit's own table; tailscaled's accept-all chain for tailscale0 is still there.
    rules = b.run("nft list ruleset").stdout
    assert "table inet laguna_kit" in rules and "table inet tailscale-standin" in rules
    assert b.run("ls -A /opt/laguna-kit/secrets").stdout.strip() == ""


def test_rerun_changes_nothing(guarded, deploy):
    res = deploy(guarded)
    assert res.ok and res.changed() == [], res.changed()


def test_rules_and_tailnet_survive_a_reboot(guarded, deploy):
    b = guarded
    b.run("systemctl reboot", check=False)
    time.sleep(2)
    b.wait_ssh()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and curl_from(boxmod.TAILNET_NS, f"http://{b.tailnet_v4}:8080/health") is None:
        time.sleep(1)
    assert_tailnet_only(b)
    res = deploy(b)
    assert res.ok, res.explain()


def test_a_rule_that_cuts_ssh_reverts_itself(guarded):
    b = guarded
    # Simulate a bad rules file that drops SSH: load it the way the kit does, but with no confirmation.
    b.run("cp /etc/laguna-kit/firewall.nft /root/bad.nft && sed -i 's/tcp dport 8080 counter drop/"
          "tcp dport { 8080, 22 } counter drop/' /root/bad.nft")
    b.run("systemd-run --quiet --unit laguna-firewall-revert --on-active=5 /usr/sbin/nft delete table inet laguna_kit"
          " && (sleep 1; nft -f /root/bad.nft) >/dev/null 2>&1 &", check=False, timeout=20)
    time.sleep(3)
    assert not ssh_works(b), "the bad rule did not cut SSH"
    time.sleep(6)
    assert b.run("true").returncode == 0, "the revert timer did not restore SSH"
    b.run("nft -f /etc/laguna-kit/firewall.nft")  # back to the kit's rules for the next test


def test_missing_auth_key_on_an_unjoined_box_fails_clearly(make_box, deploy):
    b = make_box()
    res = deploy(b, env={"TS_AUTHKEY": ""})
    assert not res.ok
    assert "is not on the tailnet and TS_AUTHKEY is not set" in res.output
    assert boxmod.Box.tailscale_auth_key not in res.output
