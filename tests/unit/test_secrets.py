"""laguna_kit/operations/secrets.py: the one way a secret reaches the box."""

from pyinfra.api import FileUploadCommand

from laguna_kit.operations.secrets import with_secret

from .fixtures import upload_text


def test_the_secret_is_a_file_removed_whatever_the_command_returns():
    cmds = list(
        with_secret(
            "tskey-abc",
            "/opt/laguna-kit/secrets/key",
            "tailscale up --auth-key=file:/opt/laguna-kit/secrets/key",
        )
    )
    assert cmds[0] == "install -d -m 700 /opt/laguna-kit/secrets"
    assert isinstance(cmds[1], FileUploadCommand) and upload_text(cmds[1]) == "tskey-abc"
    assert cmds[2] == "chmod 600 /opt/laguna-kit/secrets/key"
    assert cmds[3].endswith("; rc=$?; rm -f /opt/laguna-kit/secrets/key; exit $rc")
    assert all("tskey-abc" not in c for c in cmds if isinstance(c, str))


def test_without_a_secret_the_command_runs_alone():
    assert list(with_secret("", "/x/secrets/t", "fetch")) == ["fetch"]
