"""Rich results and their spans under a hostile user's use that toolwire already answers right: a ``ToolError``
write completed in one process and replayed from SQLite and PostgreSQL by a Dispatcher of another; ``ToolError``
nested in ``ToolError``; ``OutcomeUnknown`` with a reason of 10 MB or of another type; 100,000 parts from an async
handler; structured JSON with NaN and integer keys; subclasses of the part types; images just under and just over
the cap; histories of rich results through JSON and ``repair_history``; the spans of a ``stream()`` abandoned
without closing it; ``toolwire chat --json`` whose tool answers with an image."""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import toolwire
from toolwire import (
    Content,
    Dispatcher,
    ImagePart,
    OutcomeUnknown,
    Registry,
    ResultKind,
    SQLiteLedger,
    TextPart,
    Tool,
    ToolError,
)
from toolwire.codecs import dialect_for
from toolwire.registry import _rich

from .bodies import PROVIDERS, body
from .dialects import SIMULATED, adapter
from .rich import CONTENTS, PNG, turn_of
from .test_results_encoding import check_sdk

K = ResultKind
ROOT = Path(__file__).resolve().parent.parent
USER = {"openai-chat": {"role": "user", "content": "hi"}, "openai-responses": {"role": "user", "content": "hi"},
        "anthropic": {"role": "user", "content": "hi"}, "gemini": {"role": "user", "parts": [{"text": "hi"}]},
        "gemini-interactions": {"type": "user_input", "content": [{"type": "text", "text": "hi"}]}}


def answering(value: Any, effect: str = "read") -> Dispatcher:
    def show(n: int) -> Any:
        """Show."""
        if isinstance(value, BaseException):
            raise value
        return value
    return Dispatcher(Registry([Tool.from_function(show, effect=effect)]), read_retries=0)


# ==== a ToolError write across processes ===========================================================================
CHILD = textwrap.dedent("""
    import sys
    import toolwire
    from toolwire import Content, ImagePart, TextPart, ToolError

    def save(kind: str):
        \"\"\"Save.\"\"\"
        raise ToolError(Content(parts=[TextPart(text="the account is frozen"),
                                       ImagePart(data={png!r}, mime_type="image/png")]))

    registry = toolwire.Registry([toolwire.Tool.from_function(save, effect="write")])
    turn = toolwire.parse(sys.argv[1], open(sys.argv[2], "rb").read())
    if sys.argv[3].startswith("postgres"):
        from toolwire.registry.pg_ledger import PostgresLedger
        ledger = PostgresLedger(sys.argv[3], pool_size=1, timeout=20)
    else:
        ledger = toolwire.SQLiteLedger(sys.argv[3])
    [result] = toolwire.Dispatcher(registry, ledger=ledger).run(turn, conversation_id=sys.argv[4])
    print(result.kind.value)
""")


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("store", ["sqlite", "postgres"])
@pytest.mark.parametrize("provider", ["anthropic", "gemini-interactions"])
def test_a_tool_error_write_from_another_process_is_replayed_typed_and_never_run_again(provider, store, mode,
                                                                                         tmp_path, request):
    """A write answered ToolError(Content) in a child process is replayed here as the same tool_error with typed
    parts, from SQLite and from PostgreSQL, sync and async; the handler here never runs."""
    if store == "postgres":
        target = request.getfixturevalue("pg_dsn")
        from toolwire.registry.pg_ledger import PostgresLedger

        ledger: Any = PostgresLedger(target, pool_size=2, timeout=20)
    else:
        target = str(tmp_path / "ledger.db")
        ledger = SQLiteLedger(target)
    conversation = f"attack-{provider}-{store}-{mode}-{os.getpid()}-{tmp_path.name}"
    response = tmp_path / "response.json"
    response.write_bytes(body(provider, [("call_0", "save", {"kind": "transfer"})]))
    child = tmp_path / "child.py"
    child.write_text(CHILD.format(png=PNG))
    out = subprocess.run([sys.executable, str(child), provider, str(response), target, conversation],
                         capture_output=True, text=True, timeout=120, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "tool_error"
    runs: list[str] = []

    def save(kind: str) -> str:
        """Save."""
        runs.append(kind)
        return "ran again"

    dispatcher = Dispatcher(Registry([Tool.from_function(save, effect="write")]), ledger=ledger)
    turn = toolwire.parse(provider, response.read_bytes())
    try:
        [r] = (dispatcher.run(turn, conversation_id=conversation) if mode == "sync"
               else asyncio.run(dispatcher.arun(turn, conversation_id=conversation)))
    finally:
        getattr(ledger, "close", lambda: None)()
    assert runs == []
    assert r.kind is K.TOOL_ERROR and r.is_error
    assert r.parts == [TextPart(text="the account is frozen"), ImagePart(data=PNG, mime_type="image/png")]
    for message in toolwire.encode_results(turn, [r]):
        check_sdk(provider, message)


# ==== odd answers ==================================================================================================
class MyText(TextPart):
    pass


@pytest.mark.parametrize("value, kind, content", [
    (ToolError(ToolError("inner")), K.TOOL_ERROR, "inner"),
    (OutcomeUnknown(12345), K.HANDLER_FAILED, None),  # a read: an exception like any other
    (Content(structured={"x": float("nan"), 1: 2}), K.OK, {"x": None, "1": 2}),
    ([MyText(text="from a subclass")], K.OK, "from a subclass"),
    (Content(), K.OK, ""),
])
def test_odd_answers_are_answered_never_raised(value, kind, content):
    """A ToolError inside a ToolError, OutcomeUnknown with a number for a read, NaN and integer keys in
    structured, a subclass of TextPart, an empty Content: each is answered, its content what the model reads."""
    turn = turn_of("anthropic", ("show", {"n": 1}))
    [r] = answering(value).run(turn, conversation_id="c")
    assert r.kind is kind
    if content is not None:
        assert r.content == content
    for message in toolwire.encode_results(turn, [r]):
        check_sdk("anthropic", message)


@pytest.mark.parametrize("reason", ["x" * 10_000_000, 12345, None, "a\ud800b"])
def test_outcome_unknown_of_a_write_with_any_reason_is_answered_within_bounds(reason, tmp_path):
    """A 10 MB reason, a number, None, a lone surrogate: outcome_unknown, the reason cut, the answer encodable."""
    dispatcher = Dispatcher(Registry([Tool.from_function(lambda n: (_ for _ in ()).throw(OutcomeUnknown(reason)),
                                                         name="show", description="Show.", effect="write")]),
                            ledger=SQLiteLedger(str(tmp_path / "l.db")))
    turn = turn_of("gemini", ("show", {"n": 1}))
    [r] = dispatcher.run(turn, conversation_id="c")
    assert r.kind is K.OUTCOME_UNKNOWN and len(r.content) < 1000
    json.dumps(toolwire.encode_results(turn, [r]))


def test_a_hundred_thousand_parts_from_an_async_handler_are_capped():
    """100,000 text parts returned by an async handler under a 64 KiB cap: ok, within the cap, one marker."""
    async def show(n: int) -> Content:
        """Show."""
        return Content(parts=[TextPart(text=f"line {i}") for i in range(100_000)])

    dispatcher = Dispatcher(Registry([Tool.from_function(show, effect="read")]), max_result_bytes=65536)
    turn = turn_of("openai-responses", ("show", {"n": 1}))
    [r] = asyncio.run(dispatcher.arun(turn, conversation_id="c"))
    assert r.kind is K.OK and len(r.content.encode()) <= 65536
    assert r.parts[-1].text.startswith("[…truncated by toolwire")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_image_just_under_the_cap_is_sent_and_just_over_is_left_out(provider):
    """An image whose cost is the limit is kept whole; one base64 quantum more and it is left out with a marker."""
    limit = 4096
    raw = base64.b64decode(PNG)
    sizes = {}
    for extra in range(4000):
        part = ImagePart(data=base64.b64encode(raw + b"\0" * extra).decode(), mime_type="image/png")
        sizes.setdefault(_rich._cost(part), part)
    under = sizes[max(c for c in sizes if c <= limit)]
    over = sizes[min(c for c in sizes if c > limit)]
    turn = turn_of(provider, ("show", {"n": 1}))
    [kept] = Dispatcher(Registry([Tool.from_function(lambda n: under, name="show", description="Show.",
                                                     effect="read")]), max_result_bytes=limit).run(
        turn, conversation_id="c")
    [cut] = Dispatcher(Registry([Tool.from_function(lambda n: over, name="show", description="Show.",
                                                    effect="read")]), max_result_bytes=limit).run(
        turn, conversation_id="c")
    assert kept.parts == [under]
    assert [type(p) for p in cut.parts] == [TextPart] and "left out: 1 image" in cut.parts[0].text
    for r in (kept, cut):
        for message in toolwire.encode_results(turn, [r]):
            check_sdk(provider, message)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_history_of_every_rich_answer_survives_json_and_repair(provider):
    """Every kind of rich answer, returned and raised, in a history through JSON: repair changes nothing (Gemini:
    only the documented thought signature of a turn whose calls carry none)."""
    calls = [("show", {"n": i}) for i in range(2 * len(CONTENTS))]
    turn = turn_of(provider, *calls)
    answers = [c for c in CONTENTS.values()] + [ToolError(c) for c in CONTENTS.values()]

    def show(n: int) -> Any:
        """Show."""
        if isinstance(answers[n], BaseException):
            raise answers[n]
        return answers[n]

    results = Dispatcher(Registry([Tool.from_function(show, effect="read")])).run(turn, conversation_id="c")
    history = json.loads(json.dumps([USER[provider] if provider in USER else adapter(provider).user("hi"),
                                     *toolwire.history_messages(turn, results)]))
    repaired, report = toolwire.repair_history(provider, history)
    assert [a.kind.value for a in report.actions] == (["inserted_thought_signature"] if provider == "gemini"
                                                      else [])
    again, second = toolwire.repair_history(provider, repaired)
    assert again == repaired and second.actions == []


# ==== spans of an abandoned stream ===============================================================================
def test_a_stream_abandoned_without_closing_ends_its_spans():
    """The consumer of AsyncToolLoop.stream() breaks out and drops the generator without aclose(): its prompt's
    spans end all the same (with an error), and the caller's context is its own again."""
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry import trace

    from toolwire.harness import AsyncToolLoop
    from toolwire.sim import SimProvider

    from .otel_support import EXPORTER, finished

    EXPORTER.clear()
    tracer = trace.get_tracer("toolwire.tests")

    def lookup_demo_value(key: str) -> Content:
        """Look up one of the user's stored values: height or weight."""
        return Content(parts=[TextPart(text="170 cm"), ImagePart(data=PNG, mime_type="image/png")])

    async def main() -> Any:
        registry = Registry([Tool.from_function(lookup_demo_value, effect="read")])
        async with AsyncToolLoop("anthropic", model="m", registry=registry, base_url=url, api_key="sim-key",
                                 timeout=10.0) as loop:
            with tracer.start_as_current_span("app") as app:
                events = loop.stream("How tall am I?")
                seen = 0
                async for _ in events:
                    seen += 1
                    if seen == 2:
                        break
                del events
                gc.collect()
                for _ in range(100):
                    if any(s.name == "invoke_agent" for s in finished()):
                        break
                    await asyncio.sleep(0.02)
                assert trace.get_current_span() is app

    with SimProvider(seed=3).serve() as url:
        asyncio.run(main())
    names = {s.name: s for s in finished()}
    assert "invoke_agent" in names and not names["invoke_agent"].status.is_ok
    EXPORTER.clear()



# ==== the command line ============================================================================================
TOOLS_MODULE = textwrap.dedent('''
    import toolwire
    from toolwire import Content, ImagePart, TextPart

    JPEG = {jpeg!r}

    def lookup_demo_value(key: str) -> Content:
        """Look up one of the user's stored values: height or weight."""
        return Content(parts=[TextPart(text="170 cm"), ImagePart(data=JPEG, mime_type="image/png")],
                       structured={{"key": key, "value": "170 cm", "confidence": float("nan")}})

    TOOLS = [toolwire.Tool.from_function(lookup_demo_value, effect="read")]
''')


@pytest.mark.parametrize("provider", SIMULATED)
def test_chat_json_with_a_rich_answer_prints_the_contract(provider, tmp_path):
    """``toolwire chat --json`` whose tool answers with an image labelled wrongly and NaN in structured: exit 0,
    the JSON document, the model's answer (no fallback)."""
    from toolwire.sim import SimProvider

    from .rich import JPEG

    (tmp_path / "richtools.py").write_text(TOOLS_MODULE.format(jpeg=JPEG))
    keys = {name: "sim-key-0123" for name in dialect_for(provider).http.api_key_env}  # the dialect's own variables
    with SimProvider(seed=3).serve() as url:
        out = subprocess.run([sys.executable, "-m", "toolwire", "chat", "--provider", provider, "--model", "m",
                              "--tools", "richtools", "--base-url", url, "--json", "How tall am I?"],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path,
                             env={**os.environ, **keys, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    assert document["fallback"] is False and document["answer"]
    assert [c["result_kind"] for c in document["calls"]] == ["ok"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_opted_in_span_carries_a_rich_result_in_words_never_its_media(mode):
    """With log_arguments=True the execute_tool span's result is the answer's text form: the image is described,
    its base64 is not there (nor an API key in its text)."""
    pytest.importorskip("opentelemetry.sdk")
    import toolwire.logs

    from .otel_support import EXPORTER, finished

    key = "sk-attack-0123456789abcdef"
    big = base64.b64encode(base64.b64decode(PNG) + b"\0" * 3000).decode()
    dispatcher = answering(Content(parts=[TextPart(text=f"the map ({key}):"), ImagePart(data=big,
                                                                                        mime_type="image/png")]))
    turn = turn_of("anthropic", ("show", {"n": 1}))
    EXPORTER.clear()
    toolwire.logs.configure_logging("json", "warning", log_arguments=True)
    try:
        [r] = (dispatcher.run(turn, conversation_id="c") if mode == "sync"
               else asyncio.run(dispatcher.arun(turn, conversation_id="c")))
    finally:
        toolwire.logs.configure_logging()
    [span] = [s for s in finished() if s.name == "execute_tool show"]
    shown = span.attributes["gen_ai.tool.call.result"]
    assert r.kind is K.OK and "[image: image/png, 3070 bytes" in shown
    assert big[:40] not in shown and key not in shown
    EXPORTER.clear()
