"""``toolwire durable``: operate durable workers. ``toolwire durable recover --database URL --unseen-for SECONDS
[--to-version V] [--dry-run] [--json]`` hands the conversations of executors not seen for SECONDS back to the
queue (``toolwire.durable.recover_lost``); ``toolwire durable executors --database URL [--json]`` lists the
executors with when each was last seen. Exit codes: 0 done, 1 the database could not be used, 2 usage errors."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from .errors import UsageError

__all__ = ["register"]

#: the database URL may be given here instead of on the command line (``ps`` shows a password there)
DATABASE_ENV = "TOOLWIRE_DURABLE_DATABASE"


def _database(args: argparse.Namespace) -> str:
    url = args.database or os.environ.get(DATABASE_ENV)
    if not url:
        raise UsageError(f"give the DBOS system database: --database URL or {DATABASE_ENV}")
    return url


def _ops() -> Any:
    try:
        from . import durable
    except ImportError:
        raise UsageError("toolwire durable needs the dbos extra: pip install 'toolwire[dbos]'") from None
    return durable


def _cmd_recover(args: argparse.Namespace) -> int:
    import msgspec

    durable = _ops()
    report = durable.recover_lost(_database(args), unseen_for=args.unseen_for, to_version=args.to_version,
                                  dry_run=args.dry_run)
    if args.json:
        json.dump(msgspec.to_builtins(report), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for e in report.executors:
        age = "never" if e.unseen_seconds is None else f"{e.unseen_seconds:.1f} s ago"
        state = "LOST" if e.lost else "alive"
        print(f"{e.executor_id}: {state}, seen {age} (by {e.seen_by}), version {e.application_version}, "
              f"{e.pending} pending")
    for w in report.workflows:
        extra = f" -> version {w.to_version}" if w.to_version else ""
        wait = " (no live worker of its version yet)" if w.waiting_for_version else ""
        print(f"  {w.workflow_id} of {w.executor_id}: {w.action}{extra}{wait}")
    print(f"{len(report.workflows)} conversation(s) of {sum(1 for e in report.executors if e.lost)} lost "
          f"executor(s){' (dry run: nothing changed)' if report.dry_run else ''}")
    return 0


def _cmd_executors(args: argparse.Namespace) -> int:
    import msgspec

    seen = _ops().executors_seen(_database(args), unseen_for=args.unseen_for)
    if args.json:
        json.dump([msgspec.to_builtins(e) for e in seen], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for e in seen:
        age = "never" if e.unseen_seconds is None else f"{e.unseen_seconds:.1f} s ago"
        print(f"{e.executor_id}\t{e.application_version}\tseen {age} ({e.seen_by})\t{e.pending} pending\t"
              f"{e.host or '-'}:{e.pid or '-'}")
    return 0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= 10 ** 7:
        raise argparse.ArgumentTypeError(f"seconds must be >= 0, got {text!r}")
    return value


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``durable`` (with ``recover`` and ``executors``) to the subcommands ``sub``."""
    pd = sub.add_parser("durable", help="operate durable workers: recover the conversations of lost executors",
                        parents=[common])
    dsub = pd.add_subparsers(dest="durable_command", required=True, parser_class=type(pd),
                             help="recover (the conversations of lost executors) or executors (who is seen)")
    database = argparse.ArgumentParser(add_help=False)
    database.add_argument("--database", metavar="URL",
                          help=f"the DBOS system database, sqlite:///PATH or postgresql://... (or {DATABASE_ENV})")
    database.add_argument("--json", action="store_true", help="print one JSON document (a contract)")
    pr = dsub.add_parser("recover", parents=[common, database],
                         help="requeue the conversations of executors not seen for --unseen-for seconds")
    pr.add_argument("--unseen-for", type=_seconds, required=True, metavar="SECONDS",
                    help="an executor whose heartbeat (or, without one, whose pending conversations) is older "
                         "than this is lost")
    pr.add_argument("--to-version", metavar="VERSION", default=None,
                    help="move the conversations of other application versions to VERSION (the recorded steps "
                         "are kept and the rest runs under VERSION's code); without it each keeps its version")
    pr.add_argument("--dry-run", action="store_true", help="report what would be done, change nothing")
    pr.set_defaults(func=_cmd_recover)
    pe = dsub.add_parser("executors", parents=[common, database],
                         help="list the executors (heartbeats and pending conversations)")
    pe.add_argument("--unseen-for", type=_seconds, default=60.0, metavar="SECONDS",
                    help="the bound for the lost flag (default 60)")
    pe.set_defaults(func=_cmd_executors)
