"""Diagrams generated from the transition table, per-call traces, and the structured-log catalogue."""

from __future__ import annotations

import ast
import io
import json
import os
import shutil
import subprocess
import sys

import pytest
from structlog.testing import capture_logs

import toolwire
from toolwire import diagram
from toolwire.codecs import PROVIDERS
from toolwire.logs import CATALOGUE, configure_logging, redact_secrets
from toolwire.statemachine import CallRecord
from toolwire.statemachine.table import TRANSITIONS
from toolwire.trace import call_diagram, format_trace, write_call_diagrams

from .conftest import FIXTURES, ROOT
from .wire import anthropic_events, sse

REAL = FIXTURES / "real"
MANIFEST = [e for e in json.loads((REAL / "manifest.json").read_text()) if e["provider"] in PROVIDERS]


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolwire.cli", *args], capture_output=True, check=False, env=env)


# ---- diagrams -------------------------------------------------------------------------------------------
def test_committed_mermaid_diagram_matches_the_live_table():
    """diagrams/call.mmd is exactly what the transition table generates now (regenerate with toolwire diagram)."""
    assert (ROOT / "diagrams" / "call.mmd").read_text() == diagram.mermaid()


def test_committed_dot_source_matches_the_live_table():
    """diagrams/call.dot is exactly what the transition table generates now."""
    assert (ROOT / "diagrams" / "call.dot").read_text() == diagram.dot()


def test_readme_embeds_the_generated_mermaid_diagram():
    """The README's mermaid block is the generated diagram, so GitHub renders the live table."""
    readme = (ROOT / "README.md").read_text()
    assert "```mermaid\n" + diagram.mermaid() + "```" in readme


def test_every_transition_of_the_table_is_in_both_diagrams():
    """Each (source, trigger, destination) row of the table appears in the mermaid and dot output."""
    mmd, dot = diagram.mermaid(), diagram.dot()
    for trigger, sources, dst in TRANSITIONS:
        for src in sources:
            target = (dst or src).value
            assert f"{src.value} --> {target}: {trigger.value}" in mmd
            assert f"{src.value} -> {target} [label=\"{trigger.value}" in dot


def test_committed_svg_was_rendered_from_the_table():
    """diagrams/call.svg exists and names every state (rendered by Graphviz from call.dot)."""
    svg = (ROOT / "diagrams" / "call.svg").read_text()
    assert svg.lstrip().startswith("<?xml") or "<svg" in svg
    for state in toolwire.CallState:
        assert f">{state.value}<" in svg


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_svg_renders_when_graphviz_is_installed():
    """With Graphviz installed, --format svg prints an SVG document."""
    out = run_cli("diagram", "--format", "svg")
    assert out.returncode == 0 and b"<svg" in out.stdout


def test_svg_without_graphviz_says_so_clearly(tmp_path):
    """Without Graphviz's dot on PATH, --format svg exits 2 and says how to install it."""
    env = dict(os.environ, PATH=str(tmp_path))
    out = run_cli("diagram", "--format", "svg", env=env)
    assert out.returncode == 2
    assert b"Graphviz" in out.stderr and b"apt-get install graphviz" in out.stderr


def test_diagram_marks_a_path_with_previous_and_active_states():
    """Highlighting: visited states get s_previous, the final state s_active, the others s_default."""
    text = diagram.mermaid(visited=[toolwire.CallState.ANNOUNCED, toolwire.CallState.ACCUMULATING],
                           active=toolwire.CallState.TRUNCATED)
    assert "class announced s_previous" in text and "class accumulating s_previous" in text
    assert "class truncated s_active" in text and "class complete s_default" in text


# ---- traces ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("entry", MANIFEST, ids=lambda e: e["file"])
def test_trace_works_on_every_recording(entry):
    """A trace of each recorded stream lists every call with its transitions and payload numbers."""
    turn = toolwire.parse(entry["provider"], (REAL / entry["file"]).read_bytes(), format=entry["format"])
    text = format_trace(turn)
    assert text.startswith(f"turn: provider={entry['provider']}")
    for call in turn.calls:
        assert f"call {call.local_id} " in text
        for step in call.history:
            assert f"{step.src.value:>12} -> {step.dst.value:<12}" in text


def test_trace_cli_prints_paths_and_writes_highlighted_diagrams(tmp_path):
    """toolwire trace prints each call's path; --diagram writes one mermaid file per call, path highlighted."""
    blocks = [{"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ['{"a": 1}']},
              {"type": "tool_use", "id": "toolu_2", "name": "g", "fragments": ['{"b": ']}]
    data = sse(*anthropic_events(blocks, "max_tokens"), events=True)
    src = tmp_path / "s.sse"
    src.write_bytes(data)
    out = run_cli("trace", "--provider", "anthropic", str(src), "--diagram", str(tmp_path / "d"))
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert "call tw-0 f (call_id toolu_1): complete" in text
    assert "call tw-1 g (call_id toolu_2): truncated" in text
    assert "problem: cut_by_length" in text
    assert "finish    accumulating -> complete     at payload #" in text
    d1 = (tmp_path / "d" / "tw-1.mmd").read_text()
    assert "class truncated s_active" in d1 and "class accumulating s_previous" in d1


def test_trace_is_available_from_python_for_a_live_turn(tmp_path):
    """A StreamParser's turn carries each call's history while the stream is still open."""
    blocks = [{"type": "tool_use", "id": "toolu_1", "name": "f", "fragments": ['{"a": 1}']}]
    data = sse(*anthropic_events(blocks), events=True)
    parser = toolwire.StreamParser("anthropic")
    parser.feed(data[: data.index(b"content_block_stop")])
    live = parser.turn
    assert [(s.trigger, s.dst.value) for s in live.calls[0].history] == [("receive", "accumulating")]
    assert "accumulating" in format_trace(live)
    parser.feed(data[data.index(b"content_block_stop"):])
    parser.close()
    assert "class complete s_active" in call_diagram(parser.turn.calls[0])
    assert [p.name for p in write_call_diagrams(parser.turn, tmp_path)] == ["tw-0.mmd"]


# ---- log catalogue --------------------------------------------------------------------------------------
def _emitted_in_source() -> list[tuple[str, str, set[str]]]:
    found = []
    for path in (ROOT / "toolwire").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "emit" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "_log":
                level, event = node.args[0], node.args[1]
                assert isinstance(event, ast.Constant), f"{path}: event names must be literals"
                keys = {k.arg for k in node.keywords if k.arg is not None}
                found.append((f"{path.name}:{node.lineno}", event.value, keys))
    return found


def test_every_event_in_the_source_is_in_the_catalogue_with_its_keys():
    """Each _log.emit call names a catalogued event and passes only documented keys."""
    sites = _emitted_in_source()
    assert sites
    for where, event, keys in sites:
        assert event in CATALOGUE, f"{where}: {event} is not in toolwire.logs.CATALOGUE"
        assert keys <= CATALOGUE[event].keys, f"{where}: {event} has undocumented keys {keys - CATALOGUE[event].keys}"


def test_events_emitted_while_parsing_every_recording_carry_exactly_the_documented_keys(toolwire_debug):
    """Under capture_logs at debug, every event from parsing all recordings matches the catalogue exactly."""
    with capture_logs() as logs:
        for entry in MANIFEST:
            toolwire.parse(entry["provider"], (REAL / entry["file"]).read_bytes(), format=entry["format"])
        toolwire.parse("anthropic", b"data: {broken\n\n")
        rec = CallRecord(provider="p", local_id="x", call_id="c", name="n")
        with pytest.raises(toolwire.InvalidTransition):
            rec.answer()
    seen = set()
    for entry in logs:
        event = entry["event"]
        seen.add(event)
        assert event in CATALOGUE
        keys = set(entry) - {"event", "log_level"}
        assert keys == set(CATALOGUE[event].keys), (event, keys ^ set(CATALOGUE[event].keys))
        assert entry["log_level"] == CATALOGUE[event].level
    assert {"call.transition", "call.parsed", "call.invalid_transition", "stream.error"} <= seen


def test_readme_documents_every_catalogued_event():
    """The README's log table lists each catalogued event with its level."""
    readme = (ROOT / "README.md").read_text()
    for event, spec in CATALOGUE.items():
        assert f"| `{event}` | {spec.level} |" in readme


def test_argument_values_are_not_logged_unless_opted_in(toolwire_debug):
    """call.parsed carries no argument values by default; log_arguments=True adds them."""
    data = sse(*anthropic_events([{"type": "tool_use", "id": "t", "name": "f", "fragments": ['{"ssn": "123"}']}]),
               events=True)
    with capture_logs() as logs:
        toolwire.parse("anthropic", data)
    assert "123" not in json.dumps(logs, default=str)
    configure_logging("json", "debug", stream=io.StringIO(), log_arguments=True)
    try:
        with capture_logs() as logs:
            toolwire.parse("anthropic", data)
        parsed = [e for e in logs if e["event"] == "call.parsed"]
        assert parsed[0]["arguments"] == '{"ssn": "123"}'
    finally:
        from toolwire import _log
        _log.LOG_ARGUMENTS = False


def test_configure_logging_json_prints_one_json_object_per_line():
    """configure_logging('json') prints toolwire's events as JSON lines with level and timestamp."""
    stream = io.StringIO()
    configure_logging("json", "debug", stream=stream)
    toolwire.parse("anthropic", sse(*anthropic_events([{"type": "tool_use", "id": "t", "name": "f",
                                                        "fragments": ["{}"]}]), events=True))
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert {e["event"] for e in lines} >= {"call.transition", "call.parsed"}
    assert all("timestamp" in e and "level" in e for e in lines)


def test_configure_logging_console_and_level_filtering():
    """The console renderer prints readable lines; below the chosen level nothing is printed."""
    stream = io.StringIO()
    configure_logging("console", "info", stream=stream)
    toolwire.parse("anthropic", sse(*anthropic_events([{"type": "tool_use", "id": "t", "name": "f",
                                                        "fragments": ["{}"]}]), events=True))
    text = stream.getvalue()
    assert "call.parsed" in text and "call.transition" not in text
    with pytest.raises(toolwire.UsageError):
        configure_logging("xml")


def test_secrets_are_redacted_by_the_configured_pipeline():
    """api keys and authorization headers never reach the output."""
    out = redact_secrets(None, "info", {"event": "x", "api_key": "sk-1", "headers": {"Authorization": "Bearer s",
                                                                                    "accept": "json"}})
    assert out["api_key"] == "[redacted]" and out["headers"] == {"Authorization": "[redacted]", "accept": "json"}


def test_library_import_configures_nothing():
    """Importing toolwire leaves structlog unconfigured and adds only a NullHandler to its logger."""
    code = ("import structlog, logging, toolwire; print(structlog.is_configured(), "
            "[type(h).__name__ for h in logging.getLogger('toolwire').handlers])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False ['NullHandler']"


def test_cli_log_flags_print_json_logs_on_stderr(tmp_path):
    """--log-format json --log-level debug prints JSON events on stderr; stdout stays the contract JSON."""
    src = tmp_path / "s.sse"
    src.write_bytes(sse(*anthropic_events([{"type": "tool_use", "id": "t", "name": "f", "fragments": ["{}"]}]),
                        events=True))
    out = run_cli("parse", "--provider", "anthropic", "--log-format", "json", "--log-level", "debug", str(src))
    assert out.returncode == 0
    json.loads(out.stdout)
    events = [json.loads(line)["event"] for line in out.stderr.decode().splitlines()]
    assert "call.transition" in events
