"""A PostgreSQL connection string that cannot be read (a bad percent escape, an unclosed
IPv6 bracket) is an error that never shows its password: libpq quotes the token it
choked on, or the whole URI, and that went into the one-line error as it was (found by
the hostile re-check of the independent journal checks). No server is needed: such a
string fails before any connection is tried."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from toolbridge.journal import JournalError, open_journal

SECRET = "s3cr3tpw"
UNREADABLE = {
    "bad escape in the password": f"postgresql://ann:{SECRET}%zz@127.0.0.1/db",
    "unclosed IPv6 bracket": f"postgresql://ann:{SECRET}@[::1/db",
    "bad escape in a password parameter": f"postgresql://ann@127.0.0.1/db?password={SECRET}%zz",
    "bad escape mid-password": "postgresql://ann:s3cr%ZZ3tpw@127.0.0.1/db",
}
REFUSED = {  # readable, but nothing listens on port 1: the error names the database
    "password": f"postgresql://ann:{SECRET}@127.0.0.1:1/db?connect_timeout=5",
    "key passphrase": f"postgresql://ann@127.0.0.1:1/db?sslpassword={SECRET}&connect_timeout=5",
    "key passphrase, keywords": f"host=127.0.0.1 port=1 sslpassword={SECRET} connect_timeout=5",
}


@pytest.mark.parametrize("conninfo", UNREADABLE.values(), ids=UNREADABLE.keys())
async def test_an_unreadable_connection_string_is_an_error_without_its_password(
    conninfo: str,
) -> None:
    with pytest.raises(JournalError) as raised:
        await open_journal(conninfo, create=False)
    message = str(raised.value)
    assert SECRET not in message and "s3cr%ZZ3tpw" not in message, message
    assert "***" in message, message  # where the password was, the rest of the reason kept


def test_the_cli_shows_no_password_of_an_unreadable_connection_string(tmp_path: Path) -> None:
    conninfo = UNREADABLE["unclosed IPv6 bracket"]
    done = subprocess.run(
        [sys.executable, "-m", "toolbridge", "journal", "list", "--journal", conninfo],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done
    assert SECRET not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize("conninfo", REFUSED.values(), ids=REFUSED.keys())
async def test_the_database_named_in_an_error_has_no_password(conninfo: str) -> None:
    with pytest.raises(JournalError, match="cannot connect to the journal at") as raised:
        await open_journal(conninfo, create=False)
    assert SECRET not in str(raised.value), raised.value


async def test_a_url_that_names_nothing_is_described_as_libpqs_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `--journal postgresql://` said "cannot connect to the journal at : ...": an empty
    # name. (PGHOST points at a folder with no server socket: nothing is reached.)
    monkeypatch.setenv("PGHOST", str(tmp_path))
    with pytest.raises(JournalError) as raised:
        await open_journal("postgresql://", create=False)
    assert "the journal at (libpq's defaults: the PG* environment variables" in str(raised.value)
