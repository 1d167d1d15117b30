"""boxtools/fetch/scrub.py (issue 37 #12): a verified file whose bytes rotted on disk (one byte
flipped, size and mtime kept) is found, quarantined and leaves the record; a sound one stays."""

import hashlib
import json
import os

from laguna_kit.boxtools.fetch import records, scrub


def folder(tmp_path):
    dest = tmp_path / "Model"
    dest.mkdir()
    files = {"model-00001.safetensors": os.urandom(3 << 20), "config.json": b'{"a": 1}'}
    state = {"revision": "r" * 40, "files": {}}
    for name, data in files.items():
        (dest / name).write_bytes(data)
        if name.endswith(".safetensors"):
            want = hashlib.sha256(data).hexdigest()
        else:  # a small file: the hub's git blob id
            want = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        state["files"][name] = dict(records.stat_record(str(dest / name)), hash=want)
    records.save(str(dest), state)
    return dest


def flip(path, at=4096):
    st = os.stat(path)
    with open(path, "r+b") as fh:
        fh.seek(at)
        b = fh.read(1)
        fh.seek(at)
        fh.write(bytes([b[0] ^ 1]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime kept: the record still "proves" it


def test_a_rotten_shard_is_quarantined_and_leaves_the_record(tmp_path):
    dest = folder(tmp_path)
    assert scrub.scrub(str(dest))["mismatched"] == []
    flip(dest / "model-00001.safetensors")
    result = scrub.scrub(str(dest))
    assert [m["file"] for m in result["mismatched"]] == ["model-00001.safetensors"]
    assert result["checked"] == 2 and result["bytes"] > 3 << 20
    assert not (dest / "model-00001.safetensors").exists()
    assert len(list((dest / ".laguna-quarantine").glob("model-00001.safetensors.*"))) == 1
    left = records.load(str(dest))["files"]
    assert list(left) == ["config.json"]  # no peer is offered it; the next fetch fetches it


def test_only_the_named_files_and_the_command_line(tmp_path, capsys):
    dest = folder(tmp_path)
    flip(dest / "model-00001.safetensors")
    assert scrub.scrub(str(dest), {"config.json"})["mismatched"] == []
    out = tmp_path / "laguna-scrub.prom"
    assert scrub.main(["--dest", str(dest), "--metrics", str(out)]) == 1
    line = json.loads(capsys.readouterr().out.splitlines()[0])
    assert line["mismatched"][0]["file"] == "model-00001.safetensors"
    text = out.read_text()
    assert f'laguna_checkpoint_scrub_mismatched_files{{folder="{dest}"}} 1' in text
    assert scrub.main(["--dest", str(dest), "--metrics", str(out)]) == 0  # (already mended)
