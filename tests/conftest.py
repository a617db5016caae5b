"""Shared test setup: hypothesis profiles and a clean structlog for every test."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import structlog
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=3000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(autouse=True)
def _clean_structlog():
    """Every test starts with structlog unconfigured and the toolwire logger at its default level."""
    structlog.reset_defaults()
    logger = logging.getLogger("toolwire")
    level = logger.level
    yield
    logger.setLevel(level)
    structlog.reset_defaults()


@pytest.fixture
def toolwire_debug():
    """Enable toolwire's events down to debug for the duration of a test."""
    logger = logging.getLogger("toolwire")
    # a library that configures logging with ``disable_existing_loggers`` (as ``logging.config.dictConfig`` does by
    # default; DBOS's migrations run one in process) leaves the logger disabled for the rest of the session
    level, disabled = logger.level, logger.disabled
    logger.setLevel(logging.DEBUG)
    logger.disabled = False
    yield logger
    logger.setLevel(level)
    logger.disabled = disabled


@pytest.fixture(scope="session")
def pg_dsn():
    """A PostgreSQL DSN for the ledger tests: ``TOOLWIRE_PG_DSN`` if set, else a private cluster started for this
    test session (and stopped at its end). A cluster that cannot start fails the tests, unless
    ``TOOLWIRE_SKIP_POSTGRES=1`` is set (then they are skipped)."""
    if os.environ.get("TOOLWIRE_SKIP_POSTGRES") == "1":
        pytest.skip("TOOLWIRE_SKIP_POSTGRES=1: the PostgreSQL ledger tests are skipped")
    dsn = os.environ.get("TOOLWIRE_PG_DSN")
    if dsn:
        yield dsn
        return
    from .pg_cluster import start

    try:
        cluster = start()
    except Exception as exc:  # noqa: BLE001 - any reason the cluster cannot start fails the tests
        pytest.fail(f"cannot start a private PostgreSQL cluster (set TOOLWIRE_SKIP_POSTGRES=1 to skip the "
                    f"PostgreSQL tests): {exc}", pytrace=False)
    try:
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture(autouse=True)
def _toolwire_logger_enabled():
    """Every test starts with the ``toolwire`` logger enabled: one that ran a library configuring logging with
    ``disable_existing_loggers`` would otherwise silence toolwire's events for every later test of the process."""
    logging.getLogger("toolwire").disabled = False
    yield
