"""Every recorded real provider response parses to the calls written down next to it (tests/fixtures/real)."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

import toolwire
from toolwire.codecs import PROVIDERS

from .conftest import FIXTURES

REAL = FIXTURES / "real"
MANIFEST = json.loads((REAL / "manifest.json").read_text())
CASES = [e for e in MANIFEST if e["provider"] in PROVIDERS]


def _id(entry):
    return entry["file"]


def _expected_calls(entry):
    return [(c["call_id"], c["name"], c.get("args"), c.get("kind", "function")) for c in entry["calls"]]


def _got_calls(turn):
    return [(c.call_id, c.name, c.args, c.kind.value) for c in turn.calls]


@pytest.mark.parametrize("entry", CASES, ids=_id)
def test_recording_parses_to_the_expected_calls(entry):
    """The calls, server calls and raw finish reason of a real recording match the manifest."""
    data = (REAL / entry["file"]).read_bytes()
    turn = toolwire.parse(entry["provider"], data, format=entry["format"])
    assert _got_calls(turn) == _expected_calls(entry)
    assert [(s.call_id, s.name) for s in turn.server_calls] == [
        (s["call_id"], s["name"]) for s in entry["server_calls"]]
    assert turn.raw_finish_reason == entry["raw_finish_reason"]
    for call in turn.calls:
        if call.args is None:
            assert call.problem is not None or call.kind.value == "custom"


@pytest.mark.parametrize("entry", CASES, ids=_id)
def test_recording_parses_the_same_in_random_fragments(entry):
    """Feeding a recording in random pieces of 1 to 64 bytes gives the same turn as feeding it whole."""
    data = (REAL / entry["file"]).read_bytes()
    whole = toolwire.parse(entry["provider"], data, format=entry["format"])
    rng = random.Random(entry["file"])
    pieces, i = [], 0
    while i < len(data):
        n = rng.randint(1, 64)
        pieces.append(data[i:i + n])
        i += n
    split = toolwire.parse(entry["provider"], pieces, format=entry["format"])
    assert split == whole


@pytest.mark.parametrize("entry", CASES, ids=_id)
def test_recording_auto_format_matches_explicit_format(entry):
    """``format="auto"`` recognises each recording's container and gives the same calls."""
    data = (REAL / entry["file"]).read_bytes()
    explicit = toolwire.parse(entry["provider"], data, format=entry["format"])
    auto = toolwire.parse(entry["provider"], data)
    assert _got_calls(auto) == _got_calls(explicit)
    assert auto.finish_reason == explicit.finish_reason


@pytest.mark.parametrize("entry", [e for e in CASES if e["format"] == "sse"][:6], ids=_id)
def test_cli_prints_the_contract_json_for_a_recording(entry):
    """``toolwire parse`` prints the contract document for a recording and exits 0."""
    path = REAL / entry["file"]
    out = subprocess.run([sys.executable, "-m", "toolwire.cli", "parse", "--provider", entry["provider"], str(path)],
                         capture_output=True, check=False)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert set(doc) >= {"provider", "finish_reason", "error", "calls", "server_calls"}
    assert [(c["call_id"], c["name"], c["args"]) for c in doc["calls"]] == [
        (c["call_id"], c["name"], c.get("args")) for c in entry["calls"]]


@pytest.mark.parametrize("entry", CASES, ids=_id)
def test_cli_parse_prints_the_contract_for_every_recording(entry, capsys):
    """toolwire parse (run in-process) prints the contract document for every recording and exits 0."""
    from toolwire.cli import main

    code = main(["parse", "--provider", entry["provider"], "--format", entry["format"], str(REAL / entry["file"])])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["provider"] == entry["provider"]
    assert [(c["call_id"], c["name"], c["args"]) for c in doc["calls"]] == [
        (c["call_id"], c["name"], c.get("args")) for c in entry["calls"]]
    assert [c["name"] for c in doc["server_calls"]] == [s["name"] for s in entry["server_calls"]]
