"""laguna_kit/facts/multipart.py: a fact's output in parts after marker lines, a part as JSON."""

from laguna_kit.facts import multipart


def test_parts_after_their_markers_and_a_half_written_part_is_the_default():
    out = ["junk", "__A__", "1", "2", "__B__", '{"x": 1}']
    parts = multipart.split(out, ["__A__", "__B__", "__C__"])
    assert parts == {"__A__": ["1", "2"], "__B__": ['{"x": 1}'], "__C__": []}
    assert multipart.load_json(parts["__B__"]) == {"x": 1}
    assert multipart.load_json(['{"x":']) == {} and multipart.load_json([]) == {}
    assert multipart.load_json(["[1, 2]"]) == {}  # not an object: nothing read
