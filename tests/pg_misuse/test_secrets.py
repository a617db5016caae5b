"""A DSN's password never appears in a LedgerError, the ledger's repr or a toolwire log event, whatever shape the
DSN has (these need no server: the DSN is refused or its port is closed)."""

from __future__ import annotations

import io
import socket

import pytest

import toolwire.logs
from toolwire.registry import LedgerError, PostgresLedger

SECRET = "Sup3rS3cretPart"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fragments(secret: str) -> list[str]:
    """Pieces of the secret long enough to matter (any 6 consecutive characters)."""
    return [secret[i:i + 6] for i in range(len(secret) - 5)]


@pytest.mark.parametrize("dsn", [
    # a space in an unquoted keyword password: libpq's parse error quotes the word after it
    "host=127.0.0.1 port={port} user=u password=ab {secret}",
    # a URI libpq cannot parse: its error message repeats the whole URI, password included
    "postgresql://u:{secret}@[::1/db",
    # an unencoded '@' in a URI password: libpq splits at the first '@', the rest becomes the host
    "postgresql://u:ab@{secret}@127.0.0.1:{port}/db",
], ids=["keyword-space", "uri-unparsable", "uri-unencoded-at"])
def test_password_is_not_in_the_error_or_logs(dsn):
    """The LedgerError for a DSN with a password (and every log event) holds no piece of the password."""
    buf = io.StringIO()
    toolwire.logs.configure_logging("json", "debug", stream=buf)
    dsn = dsn.format(port=_closed_port(), secret=SECRET)
    with pytest.raises(LedgerError) as info:
        PostgresLedger(dsn, timeout=1)
    text = f"{info.value}\n{info.value!r}\n{buf.getvalue()}"
    leaked = [f for f in _fragments(SECRET) if f in text]
    assert not leaked, text
