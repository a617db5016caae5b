"""The ``toolwire`` command line (also ``python -m toolwire``): ``parse``, ``trace``, ``diagram`` here; ``declare``
and ``audit`` in ``cli_declare``; ``demo`` and ``chat`` in ``cli_harness``; ``durable`` in ``cli_durable``.

``toolwire parse --provider P [--format auto|sse|jsonl|json|NAME] [--fragment SEED] [FILE|-]`` prints one JSON
document describing the turn (``NAME``: the binary framing of a dialect that has one, for that dialect). Exit codes: 0 a turn was produced (truncated calls included: their state says so),
1 the input is unusable (the JSON ``error`` says why), 2 usage errors.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from typing import Any, Iterator, Sequence

from . import __version__, diagram, trace
from .codecs import PROVIDERS, dialects
from .errors import FramingError, ToolwireError, UsageError
from .logs import configure_logging
from .parser import FORMATS, StreamParser
from .types import ServerCall, ToolCall, Turn

__all__ = ["main", "turn_to_json"]


def _problem(call: ToolCall) -> Any:
    if call.problem is None:
        return None
    return {"code": call.problem.code.value, "message": call.problem.message}


def call_to_json(call: ToolCall) -> dict[str, Any]:
    return {
        "index": call.index,
        "local_id": call.local_id,
        "call_id": call.call_id,
        "name": call.name,
        "kind": call.kind.value,
        "args": call.args,
        "raw_arguments": call.raw_arguments,
        "state": call.state.value,
        "problem": _problem(call),
        "choice": call.choice,
    }


def server_call_to_json(call: ServerCall) -> dict[str, Any]:
    return {"index": call.index, "call_id": call.call_id, "name": call.name, "type": call.type,
            "input": call.input, "choice": call.choice}


def turn_to_json(turn: Turn) -> dict[str, Any]:
    """The contract document of ``toolwire parse`` for ``turn``."""
    err = None
    if turn.error is not None:
        err = {"type": turn.error.type, "message": turn.error.message}
    return {
        "provider": turn.provider,
        "finish_reason": turn.finish_reason.value if turn.finish_reason is not None else None,
        "raw_finish_reason": turn.raw_finish_reason,
        "error": err,
        "calls": [call_to_json(c) for c in turn.calls],
        "server_calls": [server_call_to_json(c) for c in turn.server_calls],
        "text": turn.text,
    }


def _fragments(data: bytes, seed: str) -> Iterator[bytes]:
    rng = random.Random(seed)
    i = 0
    while i < len(data):
        n = rng.randint(1, 64)
        yield data[i:i + n]
        i += n


def _read_input(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as fh:
        return fh.read()


def _cmd_parse(args: argparse.Namespace) -> int:
    try:
        data = _read_input(args.file)
    except OSError as exc:
        print(f"toolwire parse: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    parser = StreamParser(args.provider, format=args.format)
    chunks = _fragments(data, args.fragment) if args.fragment is not None else [data]
    framing_error: FramingError | None = None
    try:
        for chunk in chunks:
            parser.feed(chunk)
        parser.close()
    except FramingError as exc:
        framing_error = exc
    doc = turn_to_json(parser.turn)
    if framing_error is not None and doc["error"] is None:
        doc["error"] = {"type": "framing_error", "message": str(framing_error)}
    sys.stdout.write(json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
    return 0 if framing_error is None and parser.usable else 1


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2, as argparse does, with one line on stderr
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see '{self.prog} --help')\n")


def _cmd_diagram(args: argparse.Namespace) -> int:
    text = diagram.render(args.format)
    if args.out:
        try:
            with open(args.out, "w") as fh:
                fh.write(text)
        except OSError as exc:
            print(f"toolwire diagram: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


def _cmd_trace(args: argparse.Namespace) -> int:
    try:
        data = _read_input(args.file)
    except OSError as exc:
        print(f"toolwire trace: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    parser = StreamParser(args.provider, format=args.format)
    failed = False
    try:
        parser.feed(data)
        parser.close()
    except FramingError:
        failed = True
    turn = parser.turn
    sys.stdout.write(trace.format_trace(turn))
    if args.diagram:
        try:
            paths = trace.write_call_diagrams(turn, args.diagram, args.diagram_format)
        except OSError as exc:
            print(f"toolwire trace: cannot write diagrams into {args.diagram}: {exc.strerror or exc}",
                  file=sys.stderr)
            return 1
        for path in paths:
            print(f"wrote {path}", file=sys.stderr)
    return 0 if not failed and parser.usable else 1


def _logging_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--log-format", choices=("json", "console"), default="console",
                        help="how toolwire's structured logs are printed on stderr (default console)")
    common.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default=None,
                        help="the lowest level printed (default warning; error for demo)")
    return common


def _formats() -> tuple[str, ...]:
    """The parser's formats and the names of the registered dialects' own (binary) framings."""
    own = [d.codec.framing.name for d in dialects() if d.codec.framing.name not in FORMATS]
    return FORMATS + tuple(dict.fromkeys(own))


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="toolwire", description="One canonical tool call from every LLM provider dialect: parse and "
                "trace responses, declare and audit tools, run the harness loop against the simulated provider "
                "(demo) or a real one (chat).")
    p.add_argument("--version", action="version", version=f"toolwire {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser,
                           help="the command to run ('toolwire COMMAND --help' for its options)")
    common = _logging_options()
    pp = sub.add_parser("parse", help="parse one model response and print its calls as JSON", parents=[common])
    pp.add_argument("--provider", required=True, metavar="P",
                    help=f"dialect of the input: {', '.join(PROVIDERS)}")
    own = _formats()[len(FORMATS):]
    pp.add_argument("--format", default="auto", choices=_formats(),
                    help="auto (default), sse, jsonl (one provider event per line), json (a whole body)"
                         + "".join(f", {name} (the binary framing of the dialects that have it)" for name in own))
    pp.add_argument("--fragment", metavar="SEED", default=None,
                    help="feed the input in pieces of random size (1 to 64 bytes) chosen by SEED")
    pp.add_argument("file", nargs="?", default="-", metavar="FILE", help="input file, or - for stdin (default)")
    pp.set_defaults(func=_cmd_parse)

    pd = sub.add_parser("diagram", help="print the call state diagram, generated from the transition table",
                        parents=[common])
    pd.add_argument("--format", default="mermaid", choices=diagram.FORMATS,
                    help="mermaid (default; needs nothing), dot (Graphviz source), svg (needs Graphviz's dot)")
    pd.add_argument("--out", metavar="FILE", help="write to FILE instead of stdout")
    pd.set_defaults(func=_cmd_diagram)

    pt = sub.add_parser("trace", help="replay a captured stream and print each call's path through the machine",
                        parents=[common])
    pt.add_argument("--provider", required=True, metavar="P", help=f"dialect of the input: {', '.join(PROVIDERS)}")
    pt.add_argument("--format", default="auto", choices=_formats(), help="as for parse")
    pt.add_argument("--diagram", metavar="DIR", help="also write one diagram per call, its path highlighted")
    pt.add_argument("--diagram-format", default="mermaid", choices=diagram.FORMATS,
                    help="the format of the --diagram files: mermaid (default), dot or svg (needs Graphviz's dot)")
    pt.add_argument("file", nargs="?", default="-", metavar="FILE", help="input file, or - for stdin (default)")
    pt.set_defaults(func=_cmd_trace)

    from .cli_declare import register as register_declare  # declare, audit

    register_declare(sub, common)
    from .cli_harness import register as register_harness  # demo, chat

    register_harness(sub, common)
    from .cli_durable import register as register_durable  # durable recover, durable executors

    register_durable(sub, common)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    known = tuple(d.id for d in dialects())  # asked now: the registry, not the list at import
    if getattr(args, "provider", None) not in (None, "all") and args.provider not in known:
        parser.error(f"unknown provider {args.provider!r} (choose from {', '.join(known)})")
    configure_logging(args.log_format, args.log_level or ("error" if args.command == "demo" else "warning"))
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"toolwire: {_one_line(exc)}", file=sys.stderr)
        return 2
    except (ToolwireError, OSError) as exc:
        print(f"toolwire {args.command}: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("toolwire: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - every failure is one line on stderr, never a traceback
        print(f"toolwire {args.command}: internal error ({type(exc).__name__}): {_one_line(exc)}", file=sys.stderr)
        return 1


def _one_line(exc: BaseException) -> str:
    text = (getattr(exc, "strerror", None) and f"{exc.strerror}: {getattr(exc, 'filename', '') or ''}".rstrip(": ")
            ) if isinstance(exc, OSError) else str(exc)
    text = " ".join(str(text).split())
    return text if len(text) <= 500 else text[:500] + "…"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
