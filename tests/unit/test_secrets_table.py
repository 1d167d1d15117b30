"""Every file the kit writes that holds a secret, with its owner, its mode and how it travels
(issue 37): checked against what the operations yield for their fixtures. A secret reaches a box
only on the stdin of the command that writes it (never an upload: pyinfra's go through /tmp as the
login user under sudo), readable by root alone from its first byte (umask 077), then by the one
service group that needs it; it never appears in a command's text (pyinfra prints those).

The table is the one in docs/reference.md, "Who reaches what"."""

import pytest
from pyinfra.api import FileUploadCommand, StringCommand

from tests.unit.fixtures import case, operation_output

WEBHOOK = "https://hooks.example.net/alert?token=whsec-fixture-0123456789"
# (holds, path, group or None = root's, mode, operation, fixture, environment, argument changes,
# the secret as the fixture gives it)
SECRETS = [
    (
        "Tailscale auth key (removed once used)",
        "/run/laguna-kit/secrets/tailscale-authkey",
        None,
        "600",
        "network.tailscale_joined",
        "joins-with-a-secret-file",
        {"TS_AUTHKEY": "tskey-fixture"},
        {},
        "tskey-fixture",
    ),
    (
        "Hugging Face token (removed when the fetch ends)",
        "/run/laguna-kit/secrets/hf_token-Laguna-S-2.1-INT4",
        None,
        "600",
        "checkpoints.checkpoint_fetch_started",
        "fresh-with-token",
        {"HF_TOKEN": "hf_fixture"},
        {},
        "hf_fixture",
    ),
    *(
        (
            f"the router's {what} hashes",
            f"/etc/laguna-kit/{name}.sha256",
            None,
            "600",
            "router.router_configured",
            "first-deploy-writes-and-checks-its-files",
            {"LAGUNA_API_KEYS": "key-one-0123456789abcdef"},
            {},
            None,
        )
        for what, name in (("API key", "router-api-keys"), ("metrics key", "router-metrics-key"))
    ),
    (
        "the monitor's metrics-only router key",
        "/etc/laguna-kit/monitor/router-metrics-key",
        "prometheus",
        "640",
        "monitor.monitor_configured",
        "first-deploy-writes-checks-then-restarts-what-the-packages-started",
        {},
        {},
        "lgm-0123456789abcdef0123456789abcdef",
    ),
    (
        "Alertmanager's receivers (webhook URL with its token, mail)",
        "/etc/laguna-kit/monitor/alertmanager.yml",
        "prometheus",
        "640",
        "monitor.monitor_configured",
        "first-deploy-writes-checks-then-restarts-what-the-packages-started",
        {},
        {"alert_webhook_url": WEBHOOK},
        WEBHOOK,
    ),
]


@pytest.mark.parametrize("row", SECRETS, ids=[r[1] for r in SECRETS])
def test_each_secret_travels_on_stdin_with_its_final_owner_and_mode(row, monkeypatch):
    holds, path, group, mode, op, fixture, env, knobs, secret = row
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    doc = case(f"{op}/{fixture}.json")
    if knobs:
        doc["args"]["knobs"] = dict(doc["args"]["knobs"], **knobs)
    commands, _ = operation_output(op, doc)
    texts = [str(c) for c in commands if not isinstance(c, (FileUploadCommand,))]
    uploads = [c.dest for c in commands if isinstance(c, FileUploadCommand)]
    assert not any(u.startswith(path) for u in uploads), f"{holds}: uploaded"
    writes = [
        c
        for c in commands
        if isinstance(c, StringCommand)
        and "umask 077" in str(c)
        and any(f"cat > {p}" in str(c) for p in (path, f"{path}.laguna-new"))
    ]
    assert len(writes) == 1, f"{holds}: not written from stdin under umask 077"
    stdin = writes[0].connector_arguments.get("_stdin") or ""
    if secret is not None:
        assert secret in stdin, holds
        assert not any(secret in t for t in texts), f"{holds}: in a command's text"
    else:
        assert stdin.strip(), holds
    if path.startswith(
        "/etc/"
    ):  # a file that stays: its final group and mode before it is in place
        final = f"chmod {mode} {path}.laguna-new && mv -f {path}.laguna-new {path}"
        owned = f"chgrp {group} {path}.laguna-new && {final}" if group else final
        assert owned in texts, f"{holds}: {owned!r} not among the commands"
    else:  # a file in /run (tmpfs): removed by the command that follows whatever happens, or
        # read once and unlinked by the box tool it is named to (boxtools/fetch/run.py read_token)
        assert any(f"rm -f {path}" in t or f"--token-file {path}" in t for t in texts), holds


def test_every_private_mode_the_operations_use_is_in_the_table():
    """A new secret file must come with its row: every write under umask 077 of the fixtures
    above names a path of the table."""
    import glob
    import json
    import os

    from laguna_kit.operations import files

    paths = {r[1] for r in SECRETS}
    for f in glob.glob("tests/unit/operations/*/*.json"):
        if os.path.basename(os.path.dirname(f)).split(".")[0] in ("files", "systemd"):
            continue  # the mechanism's own fixtures, with example paths
        for c in json.load(open(f)).get("commands", []):
            text = c.get("command", "") if isinstance(c, dict) and c.get("stdin") else ""
            if "umask 077" in text and "cat > " in text:
                dest = text.rsplit("cat > ", 1)[1].split()[0].removesuffix(".laguna-new")
                if "/secrets/hf_token-" in dest:  # one per checkpoint folder
                    dest = "/run/laguna-kit/secrets/hf_token-Laguna-S-2.1-INT4"
                assert dest in paths, (os.path.basename(os.path.dirname(f)), dest)
    assert files.private("640:prometheus") and files.private("600") and not files.private("644")
