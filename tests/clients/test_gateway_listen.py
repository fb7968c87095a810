"""`bpm gateway --listen` (issue 48): the address it takes and the bearer token it reads."""

import pytest
from bpm_client.cli import main as bpm
from bpm_client.gateway.listen import bearer_token, parse_listen


@pytest.mark.parametrize(
    ("address", "parsed"),
    [
        ("127.0.0.1:8808", ("127.0.0.1", 8808)),
        ("localhost:1", ("localhost", 1)),
        ("[::1]:65535", ("::1", 65535)),
    ],
)
def test_listen_takes_host_and_port(address, parsed):
    assert parse_listen(address) == parsed


@pytest.mark.parametrize(
    "address", ["8808", ":8808", "127.0.0.1:", "127.0.0.1:0", "h:70000", "h:x"]
)
def test_a_bad_address_is_refused(address):
    with pytest.raises(ValueError, match="--listen: expected HOST:PORT"):
        parse_listen(address)


def test_bpm_gateway_refuses_a_bad_address_before_starting_anything(tmp_path, capsys):
    marker = tmp_path / "started"
    assert bpm(["gateway", "--listen", "8808", "--", "touch", str(marker)]) == 4
    assert "--listen: expected HOST:PORT" in capsys.readouterr().err
    assert not marker.exists()


@pytest.mark.parametrize(
    ("headers", "token"),
    [
        ([(b"authorization", b"Bearer bpma_abc")], "bpma_abc"),
        ([(b"Authorization", b"bearer  bpma_abc ")], "bpma_abc"),
        ([(b"authorization", b"Basic dXNlcjpwYXNz")], None),
        ([(b"authorization", b"Bearer ")], None),
        ([], None),
    ],
)
def test_the_bearer_token_of_a_request(headers, token):
    assert bearer_token({"type": "http", "headers": headers}) == token
