"""laguna_kit/boxtools/fetch/errors.py: a hash mismatch names the file and both hashes."""

from laguna_kit.boxtools.fetch.errors import FetchError, HashMismatch


def test_a_mismatch_is_a_fetch_error_naming_the_file_and_both_hashes():
    exc = HashMismatch("model-1.safetensors", "abc", "def")
    assert isinstance(exc, FetchError) and (exc.found, exc.want) == ("abc", "def")
    assert str(exc) == "model-1.safetensors: hash abc does not match the hub's def"
