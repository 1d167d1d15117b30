"""laguna_kit/operations/secrets.py: the one way a secret reaches the box."""

from pyinfra.api import FileUploadCommand, StringCommand

from laguna_kit.operations.secrets import SECRETS_DIR, secret_path, with_secret


def test_the_secret_goes_on_stdin_into_a_tmpfs_folder_and_is_removed_whatever_happens():
    path = secret_path("tailscale-authkey")
    assert path.startswith("/run/") and SECRETS_DIR == "/run/laguna-kit/secrets"
    cmds = list(with_secret("tskey-abc", path, f"tailscale up --auth-key=file:{path}"))
    assert not any(isinstance(c, FileUploadCommand) for c in cmds), "never an upload via /tmp"
    write = cmds[0]
    assert isinstance(write, StringCommand) and write.connector_arguments["_stdin"] == "tskey-abc"
    assert str(write) == f"umask 077 && install -d -m 700 {SECRETS_DIR} && cat > {path}"
    assert cmds[1].endswith(f"; rc=$?; rm -f {path}; exit $rc")
    assert all("tskey-abc" not in str(c) for c in cmds)


def test_without_a_secret_the_command_runs_alone():
    assert list(with_secret("", "/run/laguna-kit/secrets/t", "fetch")) == ["fetch"]
