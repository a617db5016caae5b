"""``toolwire demo`` (the scenarios on the simulated provider) and ``toolwire chat`` (the same loop against a
real provider, with tools from a Python module)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from typing import Any

from .codecs import dialects_with
from .errors import UsageError

__all__ = ["register"]


def _cmd_demo(args: argparse.Namespace) -> int:
    from .harness.demo import (
        MCP_SCENARIOS,
        SCENARIO_NAMES,
        dump_json,
        mcp_available,
        print_run,
        run_demo,
        sim_providers,
    )
    from .harness.fallback import LOCALES

    if args.lang not in LOCALES:
        raise UsageError(f"unknown --lang {args.lang!r}; expected one of: {', '.join(LOCALES)}")
    providers = sim_providers() if args.provider == "all" else (args.provider,)
    scenarios: tuple[str, ...] = SCENARIO_NAMES if args.scenario == "all" else (args.scenario,)
    workers = args.workers is not None or args.database is not None or args.kill_every is not None \
        or args.timeout is not None or args.stall_timeout is not None
    if args.scenario == "all" and (workers or not mcp_available()):
        # the MCP scenario needs toolwire[mcp], and its server process is not one a durable worker can resume
        scenarios = tuple(s for s in scenarios if s not in MCP_SCENARIOS)
        if not workers and not args.json:
            print(f"(the {', '.join(MCP_SCENARIOS)} scenario is left out: it needs the mcp extra, "
                  "pip install 'toolwire[mcp]')")
    elif workers and set(scenarios) & set(MCP_SCENARIOS):
        raise UsageError(f"the {args.scenario} scenario runs a local MCP server: it does not run with --workers")
    if workers:
        return _demo_workers(args, providers, scenarios)
    on_run = None if args.json else (lambda run: print_run(run, sys.stdout, args.trace))
    runs = run_demo(providers, scenarios, args.lang, on_run=on_run)
    if args.json:
        dump_json(runs, sys.stdout)
    else:
        answered = sum(1 for r in runs if not r.result.fallback)
        print(f"\n{len(runs)} runs: {answered} answered by the model, {len(runs) - answered} fallback")
    return 0


def _demo_workers(args: argparse.Namespace, providers: Any, scenarios: Any) -> int:
    import json

    if args.workers is None:
        raise UsageError("--database, --kill-every, --timeout and --stall-timeout go with --workers N")
    if args.trace:
        raise UsageError("--trace is not available with --workers")
    try:
        import dbos  # noqa: F401 - the workers and their supervisor need it
        from .harness.workers import print_report, print_worker_run, report_to_json, run_workers
    except ImportError as exc:
        raise UsageError(f"--workers needs the dbos extra: pip install 'toolwire[dbos]' ({exc})") from None
    import signal

    def terminate(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)  # unwinds through run_workers, which stops its workers

    signal.signal(signal.SIGTERM, terminate)
    on_run = None if args.json else (lambda wr: print_worker_run(wr, sys.stdout))
    from .harness.workers import WorkersError

    try:
        report = run_workers(args.workers, args.database, kill_every=args.kill_every, providers=providers,
                             scenarios=scenarios, lang=args.lang, on_run=on_run, timeout=args.timeout,
                             stall_timeout=120.0 if args.stall_timeout is None else args.stall_timeout)
    except WorkersError as exc:
        if exc.report is not None:  # what finished is still reported (exit 1, the reason on stderr)
            if args.json:
                print(json.dumps(report_to_json(exc.report), ensure_ascii=False, indent=2))
            else:
                print_report(exc.report, sys.stdout)
        raise
    if args.json:
        print(json.dumps(report_to_json(report), ensure_ascii=False, indent=2))
    else:
        print_report(report, sys.stdout)
    return 1 if any(r.error for r in report.runs) else 0


def _load_tools(spec: str) -> Any:
    from .registry import Registry, Tool

    module_name, _, attr = spec.partition(":")
    # as ``python -m`` does, the current directory comes first: ``--tools mytools`` finds ./mytools.py (the
    # console script's own sys.path[0] is its bin directory, not where the user is)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"cannot import tools module {module_name!r}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module failed while importing: say so, as theirs
        raise UsageError(f"tools module {module_name!r} failed to import ({type(exc).__name__}): {exc}") from None
    local = os.path.join(os.getcwd(), *module_name.split(".")) + ".py"
    origin = getattr(module, "__file__", None)
    if os.path.exists(local) and (origin is None or os.path.realpath(origin) != os.path.realpath(local)):
        raise UsageError(f"--tools {module_name}: that name is already taken by another module ({origin or 'built in'}),"
                         f" so ./{module_name.replace('.', '/')}.py is not what it imports: rename the file")
    value = getattr(module, attr or "TOOLS", None)
    if value is None and not attr:
        value = getattr(module, "registry", None)
    if isinstance(value, Registry):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(t, Tool) for t in value):
        return Registry(list(value))
    raise UsageError(f"{spec}: expected a list of toolwire.Tool named TOOLS (or a Registry named registry), "
                     f"or name one with module:attribute")


def _pairs(values: list[str], sep: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        key, found, rest = value.partition(sep)
        if not found or not key.strip():
            raise UsageError(f"{what} takes NAME{sep}VALUE, not {value!r}")
        out[key.strip()] = rest.strip()
    return out


def _mcp_tools(args: argparse.Namespace, stack: contextlib.ExitStack) -> list[Any]:
    """The tools of every ``--mcp`` server, each server opened on ``stack``."""
    if not args.mcp:
        if args.mcp_header or args.mcp_effect:
            raise UsageError("--mcp-header and --mcp-effect go with --mcp")
        return []
    try:
        from .mcp import MCPServer
    except ImportError as exc:  # pragma: no cover - toolwire.mcp itself imports nothing optional
        raise UsageError(f"--mcp needs the mcp extra: pip install 'toolwire[mcp]' ({exc})") from None
    headers = _pairs(args.mcp_header, ":", "--mcp-header")
    effects = _pairs(args.mcp_effect, "=", "--mcp-effect")
    tools: list[Any] = []
    for spec in args.mcp:
        is_url = spec.startswith(("http://", "https://"))
        server = stack.enter_context(MCPServer.parse(spec, headers=headers if is_url else None))
        tools.extend(server.tools(effects=effects, dialects=[args.provider]))
        for skipped in server.skipped:
            print(f"toolwire chat: {server.name}: left out {skipped.name!r} ({skipped.reason}: {skipped.detail})",
                  file=sys.stderr)
    return tools


def _cmd_chat(args: argparse.Namespace) -> int:
    import json

    from .harness.loop import ToolLoop
    from .registry import DuplicateToolError, Registry

    if args.tools is None and not args.mcp:
        raise UsageError("give the tools: --tools MODULE, one or more --mcp servers, or both")
    with contextlib.ExitStack() as stack:
        tools = list(_load_tools(args.tools)) if args.tools is not None else []
        tools += _mcp_tools(args, stack)
        try:
            registry = Registry(tools)
        except DuplicateToolError as exc:
            raise UsageError(f"two tools are named {exc.tool!r} (from --tools and --mcp, or two --mcp servers): "
                             "rename one") from None
        with ToolLoop(args.provider, model=args.model, registry=registry, base_url=args.base_url,
                      locale=args.lang, system=args.system, stream=not args.no_stream) as loop:
            result = loop.run(args.prompt)
    if args.json:
        print(json.dumps({"answer": result.answer, "fallback": result.fallback,
                          "calls": [{"name": c.name, "call_id": c.call_id, "states": c.states,
                                     "result_kind": c.result_kind} for c in result.calls]},
                         ensure_ascii=False, indent=2))
    else:
        for c in result.calls:
            print(f"{c.name} {c.call_id or '-'}: {' → '.join(c.states)} [{c.result_kind}]")
        print(result.answer)
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``demo`` and ``chat`` to the subcommands ``sub`` (``common`` holds the logging options)."""
    from .harness.demo import SCENARIO_NAMES, sim_providers

    callable_ids = tuple(d.id for d in dialects_with("http"))
    key_env = list(dict.fromkeys(name for d in dialects_with("http") for name in d.http.api_key_env))
    pd = sub.add_parser("demo", help="run the scenarios against the simulated provider over real HTTP",
                        parents=[common])
    pd.add_argument("--provider", default="all", choices=("all", *sim_providers()),
                    help="the dialect to run (default all: every one in turn)")
    pd.add_argument("--scenario", default="all", choices=("all", *SCENARIO_NAMES),
                    help="the scenario to run (default all)")
    pd.add_argument("--lang", default="en", help="en (default), pt-BR or es: the prompts and fallback messages")
    pd.add_argument("--trace", action="store_true", help="also print each turn's trace and the request count")
    pd.add_argument("--json", action="store_true", help="print one JSON document (a contract)")
    pd.add_argument("--workers", type=int, metavar="N",
                    help="run the conversations durably on N DBOS worker processes (needs toolwire[dbos])")
    pd.add_argument("--database", metavar="URL",
                    help="with --workers: the DBOS and ledger database, sqlite:///PATH or postgresql://... "
                         "(default: a temporary SQLite file)")
    pd.add_argument("--kill-every", type=float, metavar="SECONDS",
                    help="with --workers: SIGKILL a random worker about every SECONDS (and some inside writes), "
                         "then restart it")
    pd.add_argument("--timeout", type=float, metavar="SECONDS",
                    help="with --workers: fail the run (exit 1, the report of what finished) after SECONDS "
                         "(default: no limit)")
    pd.add_argument("--stall-timeout", type=float, metavar="SECONDS",
                    help="with --workers: fail the run when nothing progressed (no conversation finished, no "
                         "effect, no provider request) for SECONDS (default 120)")
    pd.set_defaults(func=_cmd_demo)

    pc = sub.add_parser("chat", help="ask a real provider, running its tool calls through your tools",
                        parents=[common])
    pc.add_argument("--provider", required=True, choices=callable_ids,
                    help=f"the provider's dialect; its key comes from the environment ({', '.join(key_env[:-1])} "
                         f"or {key_env[-1]})")
    pc.add_argument("--model", required=True, help="the model name the provider expects")
    pc.add_argument("--tools", metavar="MODULE[:ATTR]",
                    help="a module with TOOLS (a list of toolwire.Tool) or registry (a Registry), imported with "
                         "the current directory first on the path (mytools finds ./mytools.py); optional when "
                         "--mcp gives the tools")
    pc.add_argument("--mcp", action="append", default=[], metavar="COMMAND_OR_URL",
                    help="an MCP server whose tools to use (repeatable): a command line, started over stdio, or "
                         "an http(s):// URL (streamable HTTP); needs toolwire[mcp]")
    pc.add_argument("--mcp-header", action="append", default=[], metavar="NAME:VALUE",
                    help="a header for the --mcp servers reached over HTTP (repeatable), e.g. "
                         "'Authorization: Bearer ...'; never logged")
    pc.add_argument("--mcp-effect", action="append", default=[], metavar="TOOL=read|write",
                    help="the effect of an MCP tool, over the server's readOnlyHint (repeatable)")
    pc.add_argument("--base-url", default=None, help="override the provider's base URL")
    pc.add_argument("--system", default=None, help="a system prompt (instructions) for the model")
    pc.add_argument("--lang", default="en", help="en (default), pt-BR or es: the language of fallback messages")
    pc.add_argument("--no-stream", action="store_true", help="ask for whole responses instead of streams")
    pc.add_argument("--json", action="store_true",
                    help="print the answer, whether it is the fallback, and the calls as one JSON document")
    pc.add_argument("prompt", help="the user's message")
    pc.set_defaults(func=_cmd_chat)
