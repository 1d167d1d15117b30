"""laguna_kit/domain/api_clients.py: the command-line clients' headers for the router, refused
when they could split a request."""

import argparse

import pytest

from laguna_kit.domain import api_clients


def parsed(*argv):
    p = argparse.ArgumentParser()
    api_clients.add_arguments(p)
    return p.parse_args(argv)


def test_the_key_and_the_session_become_the_routers_headers():
    got = api_clients.headers(parsed("--api-key", "k-123", "--session", "s-1"))
    assert got == {"Authorization": "Bearer k-123", "X-Session-Id": "s-1"}
    assert api_clients.headers(parsed()) == {}


@pytest.mark.parametrize(
    "argv, why",
    [
        (["--session-header", "X-Id: 1\r\nEvil"], "--session-header"),
        (["--api-key", "two words"], "--api-key holds spaces"),
        (["--session", "a\nb"], "--session"),
    ],
)
def test_a_value_that_could_split_a_request_is_refused(argv, why):
    with pytest.raises(SystemExit, match=why):
        api_clients.headers(parsed(*argv))
