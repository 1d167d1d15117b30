"""A full deploy as a non-root user with passwordless sudo, the way many operators reach their
boxes: everything works, and the secrets never pass through /tmp or stay anywhere on disk."""

import json

from tests.harness import servers
from tests.harness.box import Box


def test_full_deploy_as_a_sudo_user_leaves_no_secret_behind(make_box, deploy):
    b = make_box(login_user="ops")
    res = deploy(b)
    assert res.ok, res.explain()
    assert b.run("grep -c '^ops:' /etc/passwd").stdout.strip() == "1"
    models = json.loads(b.run("curl -sf http://127.0.0.1:8080/v1/models").stdout)
    assert models["data"][0]["id"] == "laguna"
    secrets = [servers.HUB_TOKEN, Box.tailscale_auth_key]
    for secret in secrets:
        assert secret not in res.output
    found = b.run(
        "grep -rlF "
        + " ".join(f"-e {s}" for s in secrets)
        + " /tmp /var/tmp /home/ops /opt /etc /root /run 2>/dev/null",
        check=False,
    )
    assert found.stdout.strip() == "", f"a secret was left in {found.stdout}"
    again = deploy(b)
    assert again.ok and again.changed() == [], again.changed()
