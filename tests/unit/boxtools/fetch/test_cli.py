"""laguna_kit/boxtools/fetch/cli.py: one JSON summary line on success; a refusal on stderr with
exit code 2, naming the repository."""

import hashlib
import json

from laguna_kit.boxtools import fetch


def test_a_run_prints_its_summary_and_a_refusal_is_one_line_with_status_2(tmp_path, capsys):
    data = b"weights"
    manifest = tmp_path / "m.json"
    manifest.write_text(
        json.dumps(
            {
                "revision": "a" * 40,
                "files": [{"path": "w", "size": 7, "sha256": hashlib.sha256(data).hexdigest()}],
            }
        )
    )
    up = tmp_path / "up"
    up.mkdir()
    (up / "w").write_bytes(data)
    base = ["--repo", "r/x", "--manifest", str(manifest), "--dest", str(tmp_path / "d")]
    assert fetch.main([*base, "--uploaded", str(up), "--margin-mib", "0"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["repo"] == "r/x" and summary["fetched"] == 1 and summary["files"] == 1
    manifest.write_text(json.dumps({"revision": "main", "files": []}))
    assert fetch.main(base) == 2
    err = capsys.readouterr().err
    assert err.startswith("laguna-fetch: r/x: the manifest for r/x: revision 'main' is not a")
