"""The fuzz harness itself: its mutators, its properties (each shown to catch a planted fault), its reproducers
and replay, and the shrinking of a failing input."""

from __future__ import annotations

import json
import random

import msgspec
import pytest

import toolwire
from fuzz import mutators, properties, runner
from fuzz.__main__ import main as fuzz_main
from fuzz.corpus import DIALECTS, generated_seeds, load_seeds
from fuzz.minimize import minimize
from fuzz.mutators import Doc, Pool, json_mutate, mutate, terminator_cut
from fuzz.properties import Case, canonical, check

from .wire import anthropic_events, chunk, sse, tc


def _anthropic(calls=(("toolu_1", "get_weather", ['{"city": ', '"Paris"}']),), stop_reason="tool_use") -> bytes:
    blocks = [{"type": "tool_use", "id": cid, "name": name, "fragments": frags} for cid, name, frags in calls]
    return sse(*anthropic_events(blocks, stop_reason), events=True)


def _pool(dialect: str = "anthropic") -> Pool:
    seeds = load_seeds((dialect,), per_dialect=4)[dialect]
    return Pool.build(dialect, seeds, random.Random(0))


# ---- documents and mutators ---------------------------------------------------------------------------------
def test_generated_stream_seeds_round_trip_through_doc():
    """Splitting a generated SSE or JSON-lines seed into events and writing it back gives the same bytes."""
    for seed in generated_seeds(8):
        if seed.format in ("sse", "jsonl"):
            assert Doc.parse(seed.data, seed.format).dump() == seed.data, seed.name


def test_every_dialect_has_recorded_or_generated_seeds_that_parse():
    """Seeds exist for every dialect and each one parses without an exception."""
    seeds = load_seeds(per_dialect=4)
    assert set(seeds) == set(DIALECTS)
    for dialect, items in seeds.items():
        assert items, dialect
        for seed in items:
            toolwire.parse(dialect, seed.data, format=seed.format)


def test_mutate_is_deterministic_and_changes_the_input():
    """The same random state gives the same mutated bytes; most mutations change the input."""
    pool = _pool()
    data = _anthropic()
    a = [mutate(data, "sse", "anthropic", random.Random(i), pool).data for i in range(40)]
    b = [mutate(data, "sse", "anthropic", random.Random(i), pool).data for i in range(40)]
    assert a == b
    assert sum(x != data for x in a) >= 30


def _mutated(name: str, obj, seed: int = 0) -> bytes:
    return json_mutate(obj, random.Random(seed), _pool(), name)[0]


def test_json_mutators_write_what_json_cannot():
    """Deep nesting, invalid UTF-8, lone surrogates, duplicated keys, huge numbers and long strings are spliced in
    as raw JSON text."""
    obj = {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}}
    assert b"[" * 500 in _mutated("json.deep", obj) or b'{"a":' * 500 in _mutated("json.deep", obj)
    with pytest.raises(UnicodeDecodeError):
        _mutated("json.bad_utf8", obj).decode("utf-8")
    assert any(s in _mutated("json.surrogate", obj) for s in mutators._SURROGATES)
    assert len(_mutated("json.long_string", obj)) > 900
    assert any(n in _mutated("json.huge_number", obj) for n in mutators._HUGE_NUMBERS)
    duplicated = False
    for seed in range(20):
        text = _mutated("json.dup_key", obj, seed)

        def hook(pairs):
            nonlocal duplicated
            keys = [k for k, _ in pairs]
            duplicated |= len(keys) != len(set(keys))
            return dict(pairs)

        json.loads(text, object_pairs_hook=hook)
    assert duplicated


def test_deep_args_mutator_nests_json_inside_a_string():
    """Arguments are JSON text inside a JSON string: the deep mutation nests that text."""
    obj = {"delta": {"partial_json": "{}"}}
    out = json.loads(_mutated("json.deep_args", obj))
    text = out["delta"]["partial_json"]
    assert text.count("[") >= 500 or text.count('{"a":') >= 500


def test_event_mutators_move_an_event_after_the_terminator():
    """after_terminator puts an event after message_stop; terminator_cut finds the cut before it."""
    pool = _pool()
    data = _anthropic()
    doc = Doc.parse(data, "sse")
    t = mutators.terminator_index("anthropic", doc)
    assert doc.events[t].data == b'{"type": "message_stop"}'
    mutators.EVENT_MUTATORS["event.after_terminator"](doc, random.Random(3), pool, "anthropic")
    moved = doc.dump()
    cut = terminator_cut("anthropic", moved, "sse")
    assert cut is not None and cut.endswith(b'data: {"type": "message_stop"}\n\n') and moved.startswith(cut)
    assert terminator_cut("anthropic", data, "sse") is None  # nothing follows the terminator


def test_terminator_cut_for_each_dialect():
    """The stream's end is [DONE] for Chat, message_stop, response.completed, a finishReason, and
    interaction.completed; a JSON array is closed again after the cut."""
    chat = sse(chunk(tc(0, "c1", "f", "{}")), chunk(finish="tool_calls"), "[DONE]", chunk(tc(1, "c2", "g", "{}")))
    assert terminator_cut("openai-chat", chat, "sse").endswith(b"data: [DONE]\n\n")
    responses = (json.dumps({"type": "response.completed", "response": {}}) + "\n"
                 + json.dumps({"type": "response.output_item.added"}) + "\n").encode()
    assert terminator_cut("openai-responses", responses, "jsonl").count(b"\n") == 1
    gemini = b'[{"candidates":[{"finishReason":"STOP"}]}\n,{"candidates":[]}\n]'
    assert terminator_cut("gemini", gemini, "json") == b'[{"candidates":[{"finishReason":"STOP"}]}\n]'
    inter = (b'data: {"event_type":"interaction.completed","interaction":{"status":"completed"}}\n\n'
             b'data: {"event_type":"step.start","index":0,"step":{}}\n\n')
    assert terminator_cut("gemini-interactions", inter, "sse").count(b"data:") == 1


def test_canonical_handles_deep_values_without_recursion():
    """Comparing arguments nested 5,000 deep does not hit the recursion limit."""
    deep: list = []
    cur = deep
    for _ in range(5000):
        nxt: list = []
        cur.append(nxt)
        cur = nxt
    assert canonical(deep).count("[(") == 5001
    assert canonical({"b": 1, "a": [1.0, None]}) == canonical({"a": [1.0, None], "b": 1})


# ---- properties catch planted faults --------------------------------------------------------------------------
def _keys(case: Case) -> set[str]:
    return {f.key for f in check(case)}


def test_a_clean_input_passes_every_property():
    """An ordinary Anthropic stream, in pieces, dispatched twice, has no failure."""
    case = Case("anthropic", _anthropic(), "sse", chunk_seed=1, rerun=True, memory=True, echo=True,
                other_fmt="auto", cut_format="sse")
    assert check(case) == []


def _plant_key_error(monkeypatch):
    """The assembler raises KeyError (not a ToolwireError) once a call named PLANTED is open, outside the codecs'
    own guard (which turns anything a payload provokes into a protocol error)."""
    from toolwire.statemachine.assembler import Assembler

    original = Assembler.take_events

    def take_events(self):
        if any(r.name == "PLANTED" for r in list(self._open.values()) + self.records):
            raise KeyError("planted")
        return original(self)

    monkeypatch.setattr(Assembler, "take_events", take_events)


def test_a_planted_untyped_exception_is_reported_with_its_innermost_toolwire_frame(monkeypatch):
    """A KeyError escaping from the parser is an untyped_exception whose 'where' is the deepest toolwire frame."""
    _plant_key_error(monkeypatch)
    data = _anthropic((("toolu_1", "PLANTED", ["{}"]),))
    (failure,) = [f for f in check(Case("anthropic", data, "sse")) if f.stage == "parse.whole"]
    assert (failure.prop, failure.type) == ("untyped_exception", "KeyError")
    assert failure.where.startswith("toolwire/parser.py:") and failure.where.endswith("in feed")  # the plant is in tests/


def test_run_reports_writes_and_replays_a_planted_failure(monkeypatch, tmp_path, capsys):
    """A run finds the planted failure, writes a reproducer, and --replay reproduces it (exit status 1)."""
    _plant_key_error(monkeypatch)
    seeds = {"anthropic": [runner.Seed("planted", "anthropic", "sse",
                                       _anthropic((("toolu_1", "PLANTED", ['{"a": 1}']),)))]}
    monkeypatch.setattr(runner, "load_seeds", lambda dialects: seeds)
    report = runner.run(inputs=30, seed=5, dialects=("anthropic",), jobs=1, out=tmp_path, minimize_checks=100,
                        hang_seconds=None)
    assert report.inputs == 30
    planted = [f for f in report.findings if f.failure.type == "KeyError"]
    assert len(planted) == 1 and planted[0].path is not None and planted[0].path.exists()
    assert b"PLANTED" in planted[0].case.data
    assert runner.format_report(report, tmp_path)[-1] == f"fuzz: 30 inputs, {len(report.findings)} distinct failures"
    failures, key = runner.replay(planted[0].path)
    assert key == planted[0].key and key in {f.key for f in failures}
    capsys.readouterr()
    assert fuzz_main(["--replay", str(planted[0].path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "the recorded failure reproduces" in out[-2] and out[-1].startswith("fuzz: 1 inputs, ")


def test_the_chunked_comparison_catches_a_planted_disagreement(monkeypatch):
    """A parser that drops one-byte chunks gives another turn in pieces than whole: chunked_disagrees."""
    original = toolwire.StreamParser.feed

    def feed(self, chunk):
        return [] if len(chunk) == 1 else original(self, chunk)

    monkeypatch.setattr(toolwire.StreamParser, "feed", feed)
    data = _anthropic()
    case = Case("anthropic", data, "sse", pieces=[1, 40], dispatch=False)
    assert any(k.startswith("chunked_disagrees|anthropic|") for k in _keys(case))
    assert check(Case("anthropic", data, "sse", pieces=[len(data)], dispatch=False)) == []


def test_the_streaming_comparison_catches_a_planted_disagreement(monkeypatch):
    """A streaming mode that loses its finish reason is streaming_mode_disagrees."""
    from toolwire.statemachine.assembler import Assembler

    original = Assembler.build_turn

    def build_turn(self, *a, **kw):
        turn = original(self, *a, **kw)
        if not self.keep_calls:
            turn = msgspec.structs.replace(turn, finish_reason=None)
        return turn

    monkeypatch.setattr(Assembler, "build_turn", build_turn)
    case = Case("anthropic", _anthropic(), "sse", keep_calls_chunked=False, dispatch=False)
    assert "streaming_mode_disagrees|anthropic|finish_reason|finish_reason" in _keys(case)


def test_a_handler_run_twice_is_caught(monkeypatch):
    """A dispatcher that invokes a handler twice for one call is handler_count."""
    from toolwire.registry import dispatch

    original = dispatch.Dispatcher._invoke_sync

    def twice(tool, value):
        original(tool, value)
        return original(tool, value)

    monkeypatch.setattr(dispatch.Dispatcher, "_invoke_sync", staticmethod(twice))
    assert "handler_count|anthropic|count|dispatch" in _keys(Case("anthropic", _anthropic(), "sse"))


def test_a_handler_run_for_an_unclean_turn_is_caught(monkeypatch):
    """A dispatcher that runs the whole calls of a turn cut by max_tokens is ran_unclean."""
    original = toolwire.Dispatcher.run

    def run(self, turn, **kw):
        return original(self, turn, **{**kw, "allow_unclean": True})

    monkeypatch.setattr(toolwire.Dispatcher, "run", run)
    data = _anthropic((("toolu_1", "f", ["{}"]), ("toolu_2", "g", ['{"a": "cu'])), stop_reason="max_tokens")
    turn = toolwire.parse("anthropic", data)
    assert not turn.finished_cleanly and turn.calls[0].runnable
    assert "ran_unclean|anthropic|handler_ran|dispatch" in _keys(Case("anthropic", data, "sse"))


def test_a_call_made_runnable_by_data_after_the_terminator_is_caught(monkeypatch):
    """A parser that loses a message_stop followed by more data lets a block after it become a call:
    after_terminator (the stream cut at that message_stop has one runnable call, the whole stream two)."""
    stop = b'event: message_stop\ndata: {"type": "message_stop"}\n\n'
    original = toolwire.StreamParser.feed

    def feed(self, chunk):
        i = chunk.find(stop)
        if 0 <= i and len(chunk) > i + len(stop):
            chunk = chunk[:i] + chunk[i + len(stop):]
        return original(self, chunk)

    monkeypatch.setattr(toolwire.StreamParser, "feed", feed)
    good = anthropic_events([{"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ["{}"]}])
    late = [{"type": "content_block_start", "index": 1,
             "content_block": {"type": "tool_use", "id": "toolu_2", "name": "g", "input": {}}},
            {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
            {"type": "content_block_stop", "index": 1}]
    data = sse(*good, *late, {"type": "message_stop"}, events=True)
    assert data.count(stop) == 2
    case = Case("anthropic", data, "sse", pieces=[len(data)], dispatch=False, cut_format="sse")
    assert "after_terminator|anthropic|runnable_call|runnable_calls" in _keys(case)


def test_the_memory_property_reports_a_peak_over_its_bound(monkeypatch):
    """With the bound lowered to nothing, a parse's peak is reported."""
    monkeypatch.setattr(properties, "MEMORY_BASE", 0)
    monkeypatch.setattr(properties, "MEMORY_FACTOR", 0)
    assert "memory|anthropic|peak|parse" in _keys(Case("anthropic", _anthropic(), "sse", memory=True))


# ---- shrinking and the generator ---------------------------------------------------------------------------
def test_minimize_shrinks_to_what_the_failure_needs(monkeypatch):
    """A failure caused by one payload shrinks to little more than that payload."""
    _plant_key_error(monkeypatch)
    data = _anthropic((("toolu_1", "f", ['{"a": 1}']), ("toolu_2", "PLANTED", ["{}"]), ("toolu_3", "g", ["{}"])))
    case = Case("anthropic", data, "sse", chunk_seed=9, rerun=True, echo=True)
    (key,) = {f.key for f in check(case)}
    small = minimize(case, key, max_checks=400)
    assert key in {f.key for f in check(small)}
    assert b"PLANTED" in small.data and len(small.data) < len(data) // 4
    assert small.dispatch is False and small.rerun is False


def test_case_json_round_trip():
    """A case written to a reproducer reads back equal."""
    case = Case("gemini", b"\xff\x00data", "auto", pieces=[1, 2], cut_format="sse", mutations=["byte.flip"])
    assert Case.from_json(json.loads(json.dumps(case.to_json()))) == case


def test_generator_cases_are_fixed_by_seed_and_number():
    """Case i is the same from two generators; dialects take turns."""
    a, b = runner.Generator(7), runner.Generator(7)
    cases = [a.case(i) for i in range(10)]
    assert cases == [b.case(i) for i in range(10)]
    assert [c.dialect for c in cases] == [DIALECTS[i % len(DIALECTS)] for i in range(10)]
    assert runner.Generator(8).case(3) != cases[3]


def test_deep_nesting_gives_the_same_result_whatever_the_callers_stack():
    """check() leaves the same recursion headroom wherever it is called from, so an input nested close to the
    limit fails (or passes) the same way in a worker, a replay and a test."""
    from fuzz.mutators import deep_array

    def keys_at(extra: int, case: Case) -> set[str]:
        return keys_at(extra - 1, case) if extra else _keys(case)

    for depth in (985, 995, 1005):
        payload = b'{"type": "message_start", "message": ' + deep_array(depth) + b"}"
        case = Case("anthropic", b"data: " + payload + b"\n\n", "sse", dispatch=False)
        assert keys_at(0, case) == keys_at(300, case)
