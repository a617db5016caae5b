"""Odd inputs to PostgresLedger: each is a LedgerError (never a raw UnicodeEncodeError or OverflowError)."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest

from toolwire.registry import LedgerError, LedgerKey, PostgresLedger


@pytest.fixture(scope="module")
def ledger(cluster):
    led = PostgresLedger(cluster.url, timeout=5)
    try:
        yield led
    finally:
        led.close()


@pytest.mark.parametrize("op", ["claim", "get", "aclaim", "claim-fingerprint"])
def test_lone_surrogate_in_a_key_is_a_ledger_error(ledger, op):
    """A key or fingerprint holding a lone surrogate (text PostgreSQL cannot store) is a LedgerError."""
    bad = LedgerKey("conv-\ud800", "k")
    good = LedgerKey("conv-" + uuid.uuid4().hex, "k")
    with pytest.raises(LedgerError):
        if op == "claim":
            ledger.claim(bad)
        elif op == "get":
            ledger.get(bad)
        elif op == "aclaim":
            asyncio.run(ledger.aclaim(bad))
        else:
            ledger.claim(good, "save_note:\udfff")


def test_huge_int_older_than_is_a_ledger_error(ledger):
    """purge_completed(10**400) is a LedgerError (or a valid purge), never an OverflowError."""
    try:
        ledger.purge_completed(10 ** 400)
    except LedgerError:
        pass


def test_huge_int_timeout_is_a_ledger_error(cluster):
    """PostgresLedger(dsn, timeout=10**400) is a LedgerError (or a working ledger), never an OverflowError."""
    try:
        PostgresLedger(cluster.url, timeout=10 ** 400).close()
    except LedgerError:
        pass


def test_dml_only_role_can_open_an_existing_ledger(cluster):
    """A role with only DML grants on an existing toolwire_ledger (no CREATE on the schema) can open and claim."""
    PostgresLedger(cluster.url, timeout=5).close()  # the owner created the table
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS tw_app")
        conn.execute("CREATE ROLE tw_app LOGIN")
        conn.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON toolwire_ledger TO tw_app")
    app = PostgresLedger(cluster.url.replace("postgres@", "tw_app@"), timeout=5)
    try:
        assert app.claim(LedgerKey("dml-" + uuid.uuid4().hex, "k")) is None
    finally:
        app.close()

