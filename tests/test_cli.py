"""The ``toolwire parse`` command: its JSON document, options and exit codes (a contract)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .dialects import REGISTERED, adapter
from .wire import chunk, sse, tc

STREAM = sse(chunk(tc(0, "call_1", "get_weather", '{"city": ')), chunk(tc(0, None, None, '"Paris"}')),
             chunk(finish="tool_calls"), "[DONE]")


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolwire.cli", *args], input=stdin, capture_output=True,
                          check=False)


def test_parse_prints_the_contract_document():
    """The document has provider, finish_reason, error, calls (with index/call_id/name/args/state/problem/kind)."""
    out = run("parse", "--provider", "openai-chat", "-", stdin=STREAM)
    assert out.returncode == 0
    doc = json.loads(out.stdout)
    assert doc["provider"] == "openai-chat" and doc["finish_reason"] == "tool_calls" and doc["error"] is None
    assert doc["server_calls"] == []
    (call,) = doc["calls"]
    assert {k: call[k] for k in ("index", "call_id", "name", "args", "state", "problem", "kind")} == {
        "index": 0, "call_id": "call_1", "name": "get_weather", "args": {"city": "Paris"}, "state": "complete",
        "problem": None, "kind": "function"}


@pytest.mark.parametrize("provider", REGISTERED)
def test_parse_reads_a_stream_of_every_dialect(provider, tmp_path):
    """Every registered dialect: a stream of two calls (its adapter's) gives exit 0, both calls complete with their
    ids, names and arguments, a clean finish, and the same document with --fragment."""
    case = adapter(provider).small_case()
    path = tmp_path / "stream"
    path.write_bytes(case.data)
    whole = run("parse", "--provider", provider, str(path))
    assert whole.returncode == 0, whole.stderr
    doc = json.loads(whole.stdout)
    assert doc["provider"] == provider and doc["error"] is None and doc["finish_reason"] == "tool_calls"
    assert [(c["call_id"], c["name"], c["args"], c["state"]) for c in doc["calls"]] == [
        (cid, name, args, "complete") for cid, name, args in case.calls]
    pieces = run("parse", "--provider", provider, "--fragment", "7", str(path))
    assert pieces.returncode == 0 and pieces.stdout == whole.stdout


@pytest.mark.parametrize("provider", REGISTERED)
def test_parse_of_a_cut_stream_of_every_dialect_exits_zero_and_says_so(provider):
    """Every registered dialect: its stream cut just before the second call's terminator still gives a turn (exit
    0) whose second call is truncated (or not there yet, in a dialect whose calls arrive whole) and that did not
    finish. A binary framing cut inside a message says so: the error is framing_error and the exit 1 (the input
    ends in the middle of a message)."""
    a = adapter(provider)
    case = a.small_case()
    out = run("parse", "--provider", provider, stdin=case.data[:case.call_ends[1] - 2])
    assert out.returncode == (1 if a.binary_framing else 0), out.stderr
    doc = json.loads(out.stdout)
    assert [c["state"] for c in doc["calls"]][1:] in ([], ["truncated"])
    assert doc["error"]["type"] == ("framing_error" if a.binary_framing else "stream_cut")


@pytest.mark.parametrize("seed", ["1", "2", "42", "abc"])
def test_fragment_seed_gives_identical_output(seed, tmp_path):
    """--fragment SEED feeds random 1-64 byte pieces; the output equals the unfragmented one."""
    path = tmp_path / "s.sse"
    path.write_bytes(STREAM)
    whole = run("parse", "--provider", "openai-chat", str(path))
    pieces = run("parse", "--provider", "openai-chat", "--fragment", seed, str(path))
    assert pieces.returncode == whole.returncode == 0
    assert pieces.stdout == whole.stdout


def test_truncated_calls_exit_zero_and_say_so():
    """A stream cut mid-call still produced a turn: exit 0, the call's state is truncated."""
    out = run("parse", "--provider", "openai-chat", stdin=STREAM[:60 + STREAM.index(b"Paris")])
    assert out.returncode == 0
    doc = json.loads(out.stdout)
    assert [c["state"] for c in doc["calls"]] == ["truncated"]
    assert doc["error"]["type"] == "stream_cut"


@pytest.mark.parametrize("data", [b"", b"hello there", b"\xff\xfe\x00"])
def test_unusable_input_exits_one_with_an_error(data):
    """Input with nothing of the dialect in it exits 1; the JSON error says why."""
    out = run("parse", "--provider", "anthropic", stdin=data)
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    assert doc["error"]["type"] and doc["error"]["message"]
    assert doc["calls"] == []


def test_usage_errors_exit_two():
    """A missing --provider, an unknown provider or format, or a missing file exit 2."""
    assert run("parse").returncode == 2
    assert run("parse", "--provider", "cohere", stdin=STREAM).returncode == 2
    assert run("parse", "--provider", "openai-chat", "--format", "xml", stdin=STREAM).returncode == 2
    assert run("parse", "--provider", "openai-chat", "/nonexistent/file").returncode == 2


def test_explicit_formats_jsonl_and_json():
    """--format jsonl takes one event per line; --format json a whole body."""
    lines = b"\n".join(json.dumps(c).encode() for c in (
        chunk(tc(0, "c1", "f", '{"a": 1}')), chunk(finish="tool_calls")))
    out = run("parse", "--provider", "openai-chat", "--format", "jsonl", stdin=lines)
    assert json.loads(out.stdout)["calls"][0]["args"] == {"a": 1}
    body = json.dumps({"type": "message", "id": "m", "role": "assistant", "stop_reason": "tool_use", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"b": 2}}]}).encode()
    out = run("parse", "--provider", "anthropic", "--format", "json", stdin=body)
    assert out.returncode == 0 and json.loads(out.stdout)["calls"][0]["args"] == {"b": 2}


def _run_cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolwire.cli", *argv], capture_output=True, text=True,
                          timeout=120, check=False)


def test_diagram_out_into_a_missing_directory_is_one_line_exit_1(tmp_path):
    """`toolwire diagram --out` into a missing directory: one line on stderr, exit 1, no traceback."""
    proc = _run_cli("diagram", "--out", str(tmp_path / "missing" / "call.mmd"))
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr and "cannot write" in proc.stderr


@pytest.mark.parametrize("where", ["file", "unwritable"])
def test_trace_diagram_into_a_bad_directory_is_one_line_exit_1(tmp_path, where):
    """`toolwire trace --diagram DIR` where DIR is a file or cannot be created: one line on stderr, exit 1."""
    if where == "file":
        target = tmp_path / "a-file"
        target.write_text("x")
    else:
        blocker = tmp_path / "blocker"
        blocker.write_text("x")
        target = blocker / "sub"
    data = tmp_path / "in.sse"
    data.write_bytes(STREAM)
    proc = _run_cli("trace", "--provider", "openai-chat", "--diagram", str(target), str(data))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and proc.stderr.strip().count("\n") == 0
    assert "cannot write diagrams" in proc.stderr
