"""Operating durable workers: heartbeats, recovering the conversations of lost executors, moving them to a new
application version. Re-exported by ``toolwire.durable`` (``Heartbeat``, ``recover_lost``, ``RecoveryReport``).

DBOS resumes an executor's PENDING workflows only when a process launches again under the same executor id and
application version. A host lost for good, or a worker stopped (SIGSTOP, a hung VM), holds its conversations
forever. ``Heartbeat`` records, in a table of the system database, when each executor was last seen;
``recover_lost`` hands the PENDING prompt workflows of executors not seen for ``unseen_for`` seconds back to the
queue, where any live worker of the same application version takes them.

Safe while the "lost" executor is in fact alive: DBOS fences a workflow's writes by owner (the old executor's
next step record fails once another executor took the workflow over) and the toolwire ledger keeps every write
at one effect (a write the old executor had started is answered ``outcome_unknown`` by the new one, never run
again).
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

import msgspec

from . import _log
from .errors import ToolwireError, UsageError

__all__ = ["Heartbeat", "HEARTBEAT_TABLE", "ExecutorSeen", "RecoveredWorkflow", "RecoveryReport", "recover_lost",
           "executors_seen"]

#: the heartbeat table, in the system database's default schema (created when missing)
HEARTBEAT_TABLE = "toolwire_executors"
#: the prompt workflow's name (as in ``toolwire.durable.WORKFLOW_NAME``; not imported: no cycle)
_WORKFLOW_NAME = "toolwire.durable.prompt"
#: the queue DBOS's own recovery puts a workflow back on when it had none
_INTERNAL_QUEUE = "_dbos_internal_queue"


class RecoveryError(ToolwireError):
    """The system database could not be read or written for a recovery (the CLI exits 1)."""


# ==== the database ====================================================================================================
def _engine(url: Any) -> Any:
    import sqlalchemy as sa

    if not isinstance(url, str) or not url.startswith(("sqlite:///", "postgresql://", "postgres://")):
        # never echoed: it may hold a password
        raise UsageError("the system database must be a sqlite:///PATH or postgresql://... URL")
    if url.startswith("sqlite"):
        return sa.create_engine(url, poolclass=sa.pool.NullPool, connect_args={"timeout": 30})
    try:
        u = sa.make_url("postgresql://" + url.split("://", 1)[1]).set(drivername="postgresql+psycopg")
        u.port  # noqa: B018 - a port that is not a number raises here, not later
    except (ValueError, sa.exc.ArgumentError):
        raise UsageError("the system database URL cannot be read (host, port or brackets); it is not shown, as it "
                         "may hold a password") from None
    # one connection, kept: a heartbeat every few seconds should not open one each time
    return sa.create_engine(u, pool_size=1, max_overflow=0, pool_pre_ping=True,
                            connect_args={"application_name": "toolwire_heartbeat", "connect_timeout": 10})


def _table() -> Any:
    import sqlalchemy as sa

    md = sa.MetaData()
    return sa.Table(HEARTBEAT_TABLE, md,
                    sa.Column("executor_id", sa.Text, primary_key=True),
                    sa.Column("application_version", sa.Text),
                    sa.Column("pid", sa.Integer),
                    sa.Column("host", sa.Text),
                    sa.Column("seen_at", sa.BigInteger, nullable=False))


def _now_ms(engine: Any) -> Any:
    """The database's clock in milliseconds (every host compares against the same clock)."""
    import sqlalchemy as sa

    if engine.dialect.name == "sqlite":
        return sa.cast((sa.func.julianday("now") - 2440587.5) * 86400000.0, sa.BigInteger)
    return sa.cast(sa.func.extract("epoch", sa.func.clock_timestamp()) * 1000, sa.BigInteger)


def _ensure(engine: Any, table: Any) -> None:
    import sqlalchemy as sa

    try:
        table.create(engine, checkfirst=True)
    except sa.exc.DBAPIError:
        # two processes creating it at once: the loser finds it there
        if not sa.inspect(engine).has_table(HEARTBEAT_TABLE):
            raise


# ==== heartbeats ======================================================================================================
class Heartbeat:
    """Records that this worker is alive: ``executor_id, application_version, pid, host, seen_at`` in the
    ``toolwire_executors`` table of the DBOS system database, every ``interval`` seconds, from a daemon thread.

    Start it after ``DBOS.launch()`` (``executor_id`` and ``application_version`` default to DBOS's) and stop it
    before ``DBOS.destroy()``; or use it as a context manager. A stopped process (SIGSTOP) stops beating with it,
    so ``recover_lost(..., unseen_for=...)`` sees it unseen. A failed beat is logged (``durable.heartbeat_failed``)
    and retried at the next interval; the worker goes on."""

    def __init__(self, system_database_url: str, executor_id: str | None = None, *,
                 application_version: str | None = None, interval: float = 5.0) -> None:
        if not isinstance(interval, (int, float)) or isinstance(interval, bool) or not 0.05 <= interval <= 3600:
            raise UsageError(f"interval must be between 0.05 and 3600 seconds, got {interval!r}")
        for label, value in (("executor_id", executor_id), ("application_version", application_version)):
            if value is not None and (not isinstance(value, str) or not value):
                raise UsageError(f"{label} must be a non-empty string or None")
        self.interval = float(interval)
        self._engine = _engine(system_database_url)
        self._table = _table()
        self._executor_id = executor_id
        self._version = application_version
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._created = False
        self.pid = os.getpid()
        self.host = socket.gethostname()

    @property
    def executor_id(self) -> str:
        if self._executor_id is None:
            from dbos import DBOS

            self._executor_id = DBOS.executor_id
        return self._executor_id

    @property
    def application_version(self) -> str:
        if self._version is None:
            from dbos import DBOS

            self._version = DBOS.application_version
        return self._version

    def beat(self) -> None:
        """Record one heartbeat now (creates the table when missing)."""
        import sqlalchemy as sa

        t = self._table
        row = {"executor_id": self.executor_id, "application_version": self.application_version,
               "pid": self.pid, "host": self.host}
        if not self._created:
            _ensure(self._engine, t)
            self._created = True
        with self._engine.begin() as conn:
            done = conn.execute(sa.update(t).where(t.c.executor_id == row["executor_id"])
                                .values(**row, seen_at=_now_ms(self._engine))).rowcount
            if not done:
                try:
                    with conn.begin_nested():
                        conn.execute(sa.insert(t).values(**row, seen_at=_now_ms(self._engine)))
                except sa.exc.IntegrityError:  # another process of the same executor id inserted it first
                    conn.execute(sa.update(t).where(t.c.executor_id == row["executor_id"])
                                 .values(**row, seen_at=_now_ms(self._engine)))

    def start(self) -> "Heartbeat":
        """Beat once now (errors raise: a worker that cannot beat should know at start), then every
        ``interval`` seconds in a daemon thread."""
        if self._thread is not None:
            raise UsageError("this Heartbeat is already started")
        self.beat()
        self._thread = threading.Thread(target=self._run, name="toolwire-heartbeat", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.beat()
            except Exception as exc:  # noqa: BLE001 - a beat that fails is retried; the worker goes on
                _log.emit(_log.WARNING, "durable.heartbeat_failed", executor_id=self._executor_id,
                          error=type(exc).__name__)

    def stop(self) -> None:
        """Stop beating (the row stays: its ``seen_at`` ages from now on) and release the connection."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, self.interval * 2))
        self._engine.dispose()

    def __enter__(self) -> "Heartbeat":
        return self.start() if self._thread is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def forget_executors(system_database_url: str, executor_ids: list[str]) -> None:
    """Remove the heartbeat rows of ``executor_ids`` (workers that stopped for good, such as a finished demo run's),
    so that ``executors_seen`` does not list them for ever. Nothing when the table does not exist."""
    import sqlalchemy as sa

    engine = _engine(system_database_url)
    table = _table()
    try:
        with engine.begin() as conn:
            if sa.inspect(conn).has_table(HEARTBEAT_TABLE):
                conn.execute(sa.delete(table).where(table.c.executor_id.in_(list(executor_ids))))
    finally:
        engine.dispose()


# ==== what recovery reports ===========================================================================================
class ExecutorSeen(msgspec.Struct, kw_only=True):
    """One executor holding PENDING prompt workflows (or beating): when it was last seen and whether it counts
    as lost. ``seen_by`` is ``heartbeat``, or ``workflows`` when it has no heartbeat row (the latest update of
    its PENDING workflows stands in)."""

    executor_id: str
    application_version: str | None
    seen_at_ms: int | None
    unseen_seconds: float | None
    seen_by: str
    lost: bool
    pending: int
    pid: int | None = None
    host: str | None = None


class RecoveredWorkflow(msgspec.Struct, kw_only=True):
    """One PENDING prompt workflow of a lost executor and what was done to it. ``action``: ``requeued`` (back on
    its queue for a live worker of its application version), ``moved`` (to ``to_version``: cancelled and
    re-enqueued under it, its recorded steps kept), ``taken`` (another executor took it meanwhile: left alone),
    ``would_requeue``/``would_move`` (dry run). ``waiting_for_version``: no live worker of its application version
    is beating: it waits on the queue until one starts (or until it is moved with ``to_version``)."""

    workflow_id: str
    executor_id: str
    application_version: str | None
    action: str
    to_version: str | None = None
    queue: str | None = None
    waiting_for_version: bool = False


class RecoveryReport(msgspec.Struct, kw_only=True):
    """What ``recover_lost`` saw (every executor that beats or holds PENDING prompt workflows) and did (each
    workflow it requeued or moved). The ``--json`` output of ``toolwire durable recover`` (a contract)."""

    unseen_for: float
    to_version: str | None
    dry_run: bool
    executors: list[ExecutorSeen]
    workflows: list[RecoveredWorkflow]


# ==== recovery ========================================================================================================
def executors_seen(system_database_url: str, *, unseen_for: float = 60.0) -> list[ExecutorSeen]:
    """Every executor that beats or holds PENDING prompt workflows, with when it was last seen."""
    executors, _pending, _seen, client = _survey(system_database_url, unseen_for)
    client.destroy()
    return executors


def _check_unseen_for(unseen_for: Any) -> float:
    if not isinstance(unseen_for, (int, float)) or isinstance(unseen_for, bool) or not 0 <= unseen_for <= 10 ** 7:
        raise UsageError(f"unseen_for must be a number of seconds >= 0, got {unseen_for!r}")
    return float(unseen_for)


def _survey(url: str, unseen_for: Any) -> tuple[list[ExecutorSeen], list[Any], dict[str, ExecutorSeen], Any]:
    """What recovery sees. It writes nothing: a missing heartbeat table (no worker ever beat there) is read as no
    heartbeats, never created (only ``Heartbeat`` creates it)."""
    import sqlalchemy as sa
    from dbos import DBOSClient

    unseen_for = _check_unseen_for(unseen_for)
    if isinstance(url, str) and url.startswith("sqlite:///") and not os.path.isfile(url[len("sqlite:///"):]):
        raise RecoveryError("no DBOS system database at that sqlite path (a worker creates it when it launches)")
    engine = _engine(url)
    table = _table()
    try:
        with engine.connect() as conn:
            now = int(conn.execute(sa.select(_now_ms(engine))).scalar_one())
            beats = {r.executor_id: r for r in conn.execute(sa.select(table)).fetchall()} \
                if sa.inspect(conn).has_table(HEARTBEAT_TABLE) else {}
    except sa.exc.SQLAlchemyError as exc:
        raise RecoveryError(f"cannot read the heartbeats: {type(exc).__name__}") from None
    finally:
        engine.dispose()
    try:
        client = DBOSClient(system_database_url=url, system_database_pool_size=2)
    except Exception as exc:  # noqa: BLE001 - DBOS raises many kinds; one typed error
        raise RecoveryError(f"cannot open the DBOS system database: {type(exc).__name__}") from None
    try:
        pending = client.list_workflows(status="PENDING", name=_WORKFLOW_NAME, load_input=False,
                                        load_output=False)
    except Exception as exc:  # noqa: BLE001 - no DBOS tables there, or the database went away
        client.destroy()
        raise RecoveryError(f"cannot list the workflows of the system database ({type(exc).__name__}): is it the "
                            "one the workers launch DBOS on?") from None
    held: dict[str, list[Any]] = {}
    for wf in pending:
        if wf.executor_id:
            held.setdefault(wf.executor_id, []).append(wf)
    seen: dict[str, ExecutorSeen] = {}
    limit_ms = unseen_for * 1000.0
    for executor_id in sorted(set(beats) | set(held)):
        beat = beats.get(executor_id)
        mine = held.get(executor_id, [])
        at: int | None
        if beat is not None:
            at, by = int(beat.seen_at), "heartbeat"
        else:
            stamps = [int(w.updated_at) for w in mine if w.updated_at is not None]
            at, by = (max(stamps) if stamps else None), "workflows"
        age = None if at is None else max(0.0, (now - at) / 1000.0)
        seen[executor_id] = ExecutorSeen(
            executor_id=executor_id, application_version=beat.application_version if beat is not None else
            (mine[0].app_version if mine else None), seen_at_ms=at, unseen_seconds=age, seen_by=by,
            lost=bool(mine) and (at is None or now - at >= limit_ms), pending=len(mine),
            pid=beat.pid if beat is not None else None, host=beat.host if beat is not None else None)
    return list(seen.values()), pending, seen, client


def recover_lost(system_database_url: str, *, unseen_for: float, to_version: str | None = None,
                 dry_run: bool = False) -> RecoveryReport:
    """Hand the PENDING prompt workflows of every executor not seen for ``unseen_for`` seconds back to a queue,
    for any live worker to finish.

    "Seen" is the executor's latest ``Heartbeat``; an executor with PENDING workflows and no heartbeat row is seen
    at the latest update of those workflows. Each workflow goes back on its own queue (DBOS's internal queue when
    it had none) under its own application version, with its recorded steps and its recovery-attempt count:
    exactly what DBOS does when an executor restarts under the same id (and, like that, a workflow another
    executor took meanwhile is left alone). Only a worker of the same application version takes it: if none is
    beating, ``waiting_for_version`` says so. With ``to_version``, the workflows of another version are moved to
    ``to_version`` instead (put back on their queue under the new version in one statement, never seen cancelled: the
    same workflow id, the recorded requests and dispatches kept; its recovery-attempt count starts again): the recorded
    conversation continues under the new code. Never without asking. With ``to_version``, the conversations a
    plain recovery already put back on a queue under a version no live worker runs are moved too (not those
    without a version: a ``DBOSClient`` enqueue, which the latest version's workers take).

    Safe while an executor counted lost is still alive: DBOS lets only the executor that took the workflow record
    its steps, and the ledger answers a write the old executor had started ``outcome_unknown`` (never run twice).
    ``dry_run``: report, change nothing. Raises ``UsageError`` for bad arguments, ``RecoveryError`` when the
    database cannot be read."""
    if to_version is not None and (not isinstance(to_version, str) or not to_version):
        raise UsageError("to_version must be a non-empty string or None")
    executors, pending, seen, client = _survey(system_database_url, unseen_for)
    live_versions = {e.application_version for e in executors if e.seen_by == "heartbeat" and not e.lost
                     and e.unseen_seconds is not None and e.unseen_seconds < max(float(unseen_for), 1.0)}
    out: list[RecoveredWorkflow] = []
    try:
        for wf in pending:
            who = seen.get(wf.executor_id or "")
            if who is None or not who.lost:
                continue
            move = to_version is not None and wf.app_version != to_version
            version = to_version if move else wf.app_version
            rec = RecoveredWorkflow(workflow_id=wf.workflow_id, executor_id=wf.executor_id,
                                    application_version=wf.app_version, queue=wf.queue_name or _INTERNAL_QUEUE,
                                    to_version=to_version if move else None, action="",
                                    waiting_for_version=version not in live_versions)
            if dry_run:
                rec.action = "would_move" if move else "would_requeue"
            elif move:
                rec.action = _move(client, wf, to_version)  # type: ignore[arg-type]
            else:
                rec.action = _requeue(client, wf)
            out.append(rec)
            if not dry_run:
                _log.emit(_log.WARNING, "durable.recovered_lost", workflow_id=wf.workflow_id,
                          executor_id=wf.executor_id, action=rec.action, application_version=wf.app_version,
                          to_version=rec.to_version, unseen_seconds=who.unseen_seconds)
        if to_version is not None:
            # the conversations already back on a queue under a version no live worker runs (a plain recovery
            # of a retired version's executor put them there): moved too, when asked
            for wf in client.list_workflows(status="ENQUEUED", name=_WORKFLOW_NAME, load_input=False,
                                            load_output=False):
                # no version (enqueued by a DBOSClient): the latest version's workers take it anyway
                if wf.app_version is None or wf.app_version == to_version or wf.app_version in live_versions:
                    continue
                rec = RecoveredWorkflow(workflow_id=wf.workflow_id, executor_id=wf.executor_id or "",
                                        application_version=wf.app_version, queue=wf.queue_name or _INTERNAL_QUEUE,
                                        to_version=to_version, waiting_for_version=to_version not in live_versions,
                                        action="would_move" if dry_run else _move(client, wf, to_version))
                out.append(rec)
                if not dry_run:
                    _log.emit(_log.WARNING, "durable.recovered_lost", workflow_id=wf.workflow_id,
                              executor_id=wf.executor_id, action=rec.action, application_version=wf.app_version,
                              to_version=to_version, unseen_seconds=None)
    finally:
        client.destroy()
    return RecoveryReport(unseen_for=float(unseen_for), to_version=to_version, dry_run=bool(dry_run),
                          executors=executors, workflows=out)


def _requeue(client: Any, wf: Any) -> str:
    """DBOS's own recovery step for one workflow: PENDING on ``executor_id`` -> ENQUEUED on its queue, keeping its
    version and recovery-attempt count; a no-op when another executor took it meanwhile. DBOS has no public call
    for it (``resume_workflow`` also clears the attempt count, so a conversation that crashes every worker would
    never reach ``max_recovery_attempts``; and it moves a workflow whoever holds it)."""
    sys_db = getattr(client, "_sys_db", None)
    reenqueue = getattr(sys_db, "reenqueue_for_recovery", None)
    if reenqueue is None:  # a DBOS without it: the public resume, on the workflow's own queue
        client.resume_workflow(wf.workflow_id, queue_name=wf.queue_name or None)
        return "requeued"
    return "requeued" if reenqueue(wf.workflow_id, [wf.executor_id], _INTERNAL_QUEUE) else "taken"


def _move(client: Any, wf: Any, to_version: str) -> str:
    """To another application version, same workflow id and recorded steps, in one statement: a PENDING workflow
    of the lost executor back on its queue (as ``_requeue`` does, which fences the old execution, should it be
    alive) under ``to_version`` with a fresh recovery budget; an ENQUEUED one relabelled. Nothing in between is
    visible: a handle waiting for the result never sees the conversation cancelled, a crash leaves it either moved
    or not, a workflow that finished or was taken meanwhile is left alone (``taken``), and two recoveries at once
    move it once. DBOS has no public call for this (cancel then rewind passes through CANCELLED and rewinds a
    workflow that finished meanwhile, deleting the steps its writes' ledger keys come from)."""
    sys_db = getattr(client, "_sys_db", None)
    table = getattr(getattr(sys_db, "tables", None), "workflow_status", None)
    if table is None or not all(hasattr(sys_db, a) for a in ("_wf", "_now_ms_sql", "engine")):
        raise RecoveryError("this DBOS release does not expose its workflow table the way toolwire needs to move a "
                            "conversation to another version (tested with dbos 3.4); nothing was moved")
    import sqlalchemy as sa

    values: dict[str, Any] = {"application_version": to_version, "recovery_attempts": 0,
                              "updated_at": sys_db._now_ms_sql()}
    query = sa.update(table).where(*sys_db._wf(table, wf.workflow_id))
    if wf.status == "PENDING":
        query = query.where(table.c.status == "PENDING", table.c.executor_id == wf.executor_id)
        values.update(status="ENQUEUED", owner_xid=None, started_at_epoch_ms=None,
                      queue_name=sa.func.coalesce(table.c.queue_name, _INTERNAL_QUEUE))
    else:
        query = query.where(table.c.status == "ENQUEUED")
    with sys_db.engine.begin() as conn:
        moved = conn.execute(query.values(**values)).rowcount > 0
    return "moved" if moved else "taken"
