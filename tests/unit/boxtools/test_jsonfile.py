"""laguna_kit/boxtools/jsonfile.py: the one contract for a JSON record: an object, None for no
file or an empty one, JsonFileError for anything else."""

import pytest

from laguna_kit.boxtools import jsonfile


def test_an_object_none_or_an_error(tmp_path):
    path = tmp_path / "r.json"
    assert jsonfile.read(str(path)) is None  # missing
    path.write_text("  \n")
    assert jsonfile.read(str(path)) is None  # empty
    jsonfile.write(str(path), {"a": 1})
    assert jsonfile.read(str(path)) == {"a": 1} and not (tmp_path / "r.json.tmp").exists()
    path.write_text("[1]")
    with pytest.raises(jsonfile.JsonFileError, match="not an object"):
        jsonfile.read(str(path))
    path.write_text("{half")
    with pytest.raises(jsonfile.JsonFileError, match="not valid JSON"):
        jsonfile.read(str(path))
    assert jsonfile.read_or_none(str(path)) is None  # a record half-written is no record
    assert jsonfile.parse('{"b": 2}', "x") == {"b": 2} and jsonfile.parse(None) is None
