"""laguna_kit/domain/fleet.py: the fleet's API keys, read from the control machine and judged."""

import pytest
from pyinfra.api import OperationError

from laguna_kit.domain import fleet


def test_api_keys_from_the_environment_and_a_file(tmp_path):
    f = tmp_path / "keys"
    # a # starts a comment only at the start of a line: inside a key it is part of the key
    f.write_text("# the fleet's keys\n  # laptop\nkey-from-file#0123456789abc\n\n")
    env = {"K": "key-one-0123456789abcdef, key-two-0123456789abcdef key-one-0123456789abcdef"}
    assert fleet.api_keys("K", str(f), env) == [
        "key-from-file#0123456789abc",
        "key-one-0123456789abcdef",
        "key-two-0123456789abcdef",
    ]
    f.write_text("key-from-file-0123456789 # laptop\n")  # was cut at the # and accepted
    with pytest.raises(OperationError, match="holds spaces"):
        fleet.api_keys("", str(f), {})
    with pytest.raises(OperationError, match="set K=<key>"):
        fleet.api_keys("K", "", {})
    with pytest.raises(OperationError, match="router_api_keys_file"):
        fleet.api_keys("K", str(tmp_path / "missing"), env)


@pytest.mark.parametrize(
    "key, why",
    [
        ("passwordpassword", "fewer than 22"),
        ("passwordpasswordpasswordpassword", "repeats a word"),
        ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "distinct characters"),
        ("0000000000000000000000000000000000000001", "distinct characters"),
        ("0123456789abcdef0123456789abcde", "fewer than 32"),  # 31 hex: 124 bits
        ("key\x01control-0123456789abcdef", "control characters"),
    ],
)
def test_weak_api_keys_are_refused(key, why):
    with pytest.raises(OperationError, match=why):
        fleet.api_keys("K", "", {"K": key})


def test_a_random_key_of_128_bits_or_more_passes():
    import secrets

    assert fleet.api_keys("K", "", {"K": secrets.token_hex(24)})  # openssl rand -hex 24
    assert fleet.api_keys("K", "", {"K": secrets.token_urlsafe(16)})  # 22 base64url characters
    # Every random key of 128 bits passes, not most: 1.7 % of `openssl rand -hex 16` keys have
    # fewer than 12 distinct characters (the floor this refused them by), and a run of this test
    # drew 3b3b4939933884985bd4389db8348d8b (7: the floor of 8 refused it).
    assert fleet.key_problem("3b3b4939933884985bd4389db8348d8b") is None
    refused = [k for k in (secrets.token_hex(16) for _ in range(5000)) if fleet.key_problem(k)]
    assert refused == []
    assert not [k for k in (secrets.token_urlsafe(16) for _ in range(5000)) if fleet.key_problem(k)]


def test_a_quoted_key_and_keys_split_by_spaces_are_named():
    """Issue 40: a key with literal quotes was accepted and every client then got 401; a key
    written with a space in it was split silently."""
    import pytest
    from pyinfra.api import OperationError

    key = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
    assert "wrapped in quotes" in fleet.key_problem(f'"{key}"')
    assert "wrapped in quotes" in fleet.key_problem(f"'{key}'")
    assert fleet.key_problem(key) is None
    with pytest.raises(OperationError, match="spaces and commas in LAGUNA_API_KEYS separate keys"):
        fleet.api_keys("LAGUNA_API_KEYS", "", {"LAGUNA_API_KEYS": "my secret key phrase"})
    with pytest.raises(OperationError, match="wrapped in quotes"):
        fleet.api_keys("LAGUNA_API_KEYS", "", {"LAGUNA_API_KEYS": f'"{key}"'})
