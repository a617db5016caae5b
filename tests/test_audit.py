"""The portability audit: renames, losses and broken limits per dialect, as data, as JSON and as a table,
and the ``toolwire audit`` command."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from toolwire.audit import AuditReport, audit_tools
from toolwire.cli import main
from toolwire.codecs.capabilities import CAPABILITIES, PORTABLE_NAME
from toolwire.codecs.declare import DIALECTS, DeclarationLimitError, ToolSpec, declare, suggest_name

LONG = "summarize_the_quarterly_revenue_reports_for_the_selected_business_unit"  # 70 characters
LOSSY = {
    "name": "tag_items",
    "description": "Tag items",
    "input_schema": {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "priority": {"type": "integer", "enum": [1, 2, 3]},
            "target": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        },
        "required": ["tags"],
        "additionalProperties": False,
    },
}


def breaking_set() -> list[dict]:
    """130 tools: one name too long for OpenAI, one starting with a digit, one lossy schema for Gemini."""
    plain = {"type": "object", "properties": {"q": {"type": "string"}}}
    tools = [{"name": LONG, "description": "d", "input_schema": plain},
             {"name": "9lives", "description": "d", "input_schema": plain},
             LOSSY]
    tools += [{"name": f"filler_{i:03d}", "input_schema": plain} for i in range(127)]
    assert len(LONG) == 70 and len(tools) == 130
    return tools


def test_breaking_set_each_limit_once():
    """Each broken limit is reported exactly once, in the dialects that have it and no others."""
    doc = audit_tools(breaking_set()).to_json()
    assert doc["source"] is None and doc["tools"] == 130
    assert list(doc["dialects"]) == list(DIALECTS)
    found = Counter((d, x["limit"], x["tool"]) for d, r in doc["dialects"].items() for x in r["limits"])
    assert found == Counter({
        ("openai-chat", "name_length", LONG): 1,
        ("openai-chat", "max_tools", "filler_125"): 1,
        ("openai-responses", "name_length", LONG): 1,
        ("openai-responses", "max_tools", "filler_125"): 1,
        ("gemini", "name_pattern", "9lives"): 1,
        ("gemini-interactions", "name_pattern", "9lives"): 1,
        ("bedrock-converse", "name_length", LONG): 1,
    })
    chat = doc["dialects"]["openai-chat"]
    assert {"tool": LONG, "limit": "name_length", "value": 70, "max": 64} in chat["limits"]
    assert {"tool": "filler_125", "limit": "max_tools", "value": 130, "max": 128} in chat["limits"]
    gemini = doc["dialects"]["gemini"]
    assert {"tool": "9lives", "limit": "name_pattern", "value": "9lives",
            "max": "^" + CAPABILITIES["gemini"].name_pattern + "$"} in gemini["limits"]


def test_breaking_set_renames_and_ok():
    """Names a dialect refuses are listed with a suggestion; ok is false exactly where a limit is broken."""
    doc = audit_tools(breaking_set()).to_json()["dialects"]
    assert {d: r["ok"] for d, r in doc.items()} == {
        "openai-chat": False, "openai-responses": False, "anthropic": True, "gemini": False,
        "gemini-interactions": False, "bedrock-converse": False}
    assert [(r["tool"], r["to"]) for r in doc["openai-chat"]["renamed"]] == [(LONG, suggest_name(LONG, CAPABILITIES[
        "openai-chat"]))]
    assert [(r["tool"], r["to"]) for r in doc["gemini"]["renamed"]] == [("9lives", "_9lives")]
    assert doc["anthropic"] == {"ok": True, "renamed": [], "lost": [], "limits": []}


def test_breaking_set_gemini_losses():
    """The lossy schema shows up for Gemini (keywords Google ignores) and nowhere else."""
    doc = audit_tools(breaking_set()).to_json()["dialects"]
    for dialect in ("gemini", "gemini-interactions"):
        assert [(x["tool"], x["path"], x["keyword"]) for x in doc[dialect]["lost"]] == [
            ("tag_items", "$.properties.tags.uniqueItems", "uniqueItems")]
        assert set(doc[dialect]["lost"][0]) == {"tool", "path", "keyword", "detail"}
    for dialect in ("openai-chat", "openai-responses", "anthropic"):
        assert doc[dialect]["lost"] == []


def test_openapi_audit_reports_every_loss():
    """Audited as Gemini OpenAPI parameters, the lossy schema loses its set, enum, oneOf and closedness."""
    doc = audit_tools([LOSSY], dialects=["gemini"], schema_mode="openapi").to_json()
    lost = {(x["path"], x["keyword"]) for x in doc["dialects"]["gemini"]["lost"]}
    assert lost == {("$.properties.tags.uniqueItems", "uniqueItems"), ("$.properties.priority.enum", "enum"),
                    ("$.properties.target.oneOf", "oneOf"), ("$.additionalProperties", "additionalProperties")}
    assert doc["dialects"]["gemini"]["ok"] is True


def test_openapi_audit_refused_schema_is_not_ok():
    """A schema Gemini's OpenAPI subset cannot take at all is a loss marked refused, and ok is false."""
    tree = {"name": "tree", "input_schema": {"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}},
                                             "$defs": {"N": {"type": "object", "properties": {
                                                 "kids": {"type": "array", "items": {"$ref": "#/$defs/N"}}}}}}}
    result = audit_tools([tree], dialects=["gemini"], schema_mode="openapi").dialects["gemini"]
    assert result.ok is False
    assert result.lost[0].keyword == "$ref" and result.lost[0].detail.startswith("refused")


def test_source_dialect_is_left_out():
    """--from P audits every dialect but P."""
    report = audit_tools(breaking_set(), source="openai-chat")
    assert report.source == "openai-chat"
    assert set(report.dialects) == set(DIALECTS) - {"openai-chat"}


def test_suggested_names_are_portable():
    """Every suggested rename is accepted by every dialect."""
    for name in (LONG, "9lives", "crm.lookup", "a b/c", "-x", "é" * 80):
        for cap in CAPABILITIES.values():
            suggestion = suggest_name(name, cap)
            assert re.fullmatch(PORTABLE_NAME, suggestion), (name, suggestion)
            assert all(c.name_ok(suggestion) for c in CAPABILITIES.values())


def test_text_table():
    """The readable report has a row per dialect and lists renames, limits and losses."""
    text = audit_tools(breaking_set()).to_text()
    assert text.startswith("130 tool(s), written for: not given")
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.split()
            and line.split()[0] in DIALECTS}
    assert rows["anthropic"] == ["yes", "0", "0", "0"]
    assert rows["openai-chat"] == ["NO", "1", "0", "2"]
    assert rows["gemini"] == ["NO", "1", "1", "1"]
    assert f"rename  {LONG} -> " in text
    assert "limit   filler_125: max_tools 130 exceeds 128" in text
    assert "lost    tag_items $.properties.tags.uniqueItems uniqueItems" in text


def test_report_accepts_specs_and_mappings():
    """audit_tools takes ToolSpec objects as well as mappings, with the same result."""
    specs = [ToolSpec(name="9lives", input_schema={"type": "object"})]
    assert audit_tools(specs) == audit_tools([{"name": "9lives", "input_schema": {"type": "object"}}])
    assert isinstance(audit_tools(specs), AuditReport)


def test_custom_tool_is_reported_where_it_cannot_be_declared():
    """A custom (free-text) tool written for Responses ports to Chat; every other dialect reports it as a broken
    tool_kind limit (not ok), the same refusal ``declare`` raises."""
    sql = {"name": "run_sql", "description": "Run a query", "kind": "custom",
           "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "SELECT"'}}
    plain = {"name": "get_time", "input_schema": {"type": "object", "properties": {}}}
    doc = audit_tools([plain, sql], source="openai-responses").to_json()
    assert doc["dialects"]["openai-chat"] == {"ok": True, "renamed": [], "lost": [], "limits": []}
    for dialect in ("anthropic", "gemini", "gemini-interactions"):
        report = doc["dialects"][dialect]
        assert report["ok"] is False
        assert report["limits"] == [{"tool": "run_sql", "limit": "tool_kind", "value": "custom",
                                     "max": "function"}]
    text = audit_tools([plain, sql], source="openai-responses").to_text()
    assert "limit   run_sql: tool_kind 'custom'" in text


# ---- the audit command ------------------------------------------------------------------------------------------


@pytest.fixture
def breaking_file(tmp_path):
    path = tmp_path / "tools.json"
    tools = breaking_set()
    path.write_text(json.dumps({"tools": [{"name": t["name"], "description": t.get("description", ""),
                                           "inputSchema": t["input_schema"]} for t in tools]}))
    return str(path)


def test_cli_audit_json(breaking_file, capsys):
    """audit --json prints the report document and exits 0 even with findings."""
    assert main(["audit", breaking_file, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == audit_tools(breaking_set()).to_json()
    for dialect in doc["dialects"].values():
        assert set(dialect) == {"ok", "renamed", "lost", "limits"}
        assert all(set(x) == {"tool", "limit", "value", "max"} for x in dialect["limits"])


def test_cli_audit_table_from(breaking_file, capsys):
    """audit --from P prints the table without P."""
    assert main(["audit", breaking_file, "--from", "gemini"]) == 0
    out = capsys.readouterr().out
    assert "written for: gemini" in out
    assert not any(line.startswith("gemini ") for line in out.splitlines())
    assert any(line.startswith("gemini-interactions") for line in out.splitlines())


def test_cli_audit_unusable_exits_1(tmp_path, capsys):
    """A TOOLS.json that is not a tool list exits 1."""
    path = tmp_path / "t.json"
    path.write_text('{"tools": 3}')
    assert main(["audit", str(path)]) == 1
    assert "toolwire audit" in capsys.readouterr().err


def test_cli_audit_usage_exits_2(breaking_file):
    """An unknown --from dialect is a usage error (exit 2)."""
    with pytest.raises(SystemExit) as info:
        main(["audit", breaking_file, "--from", "nope"])
    assert info.value.code == 2


# ---- schema shapes a provider refuses whatever their size ------------------------------------------------------

@pytest.mark.parametrize("schema, refused_by, limit", [
    ({"type": "array", "items": {"type": "string"}}, {"openai-chat", "openai-responses", "anthropic",
                                                      "bedrock-converse"}, "schema_root"),
    ({"properties": {"a": {"type": "string"}}}, {"openai-chat", "openai-responses", "anthropic", "bedrock-converse"},
     "schema_root"),
    ({"type": "object", "anyOf": [{"required": ["a"]}]}, {"anthropic"}, "schema_root"),
    ({"type": "object", "properties": {"tags": {"type": "array"}}}, {"openai-chat", "openai-responses"},
     "array_items"),
    ({"type": "object", "properties": {"a": {"anyOf": [{"type": "array"}, {"type": "null"}]}}},
     {"openai-chat", "openai-responses"}, "array_items"),
], ids=["array_root", "no_root_type", "top_level_anyOf", "array_without_items", "nested_array_without_items"])
def test_schema_shapes_providers_refuse_are_reported_per_tool(schema, refused_by, limit):
    """A root that is not an object schema, or an array schema without items, is a finding of that one tool in
    the dialects whose API refuses it (the others stay ok)."""
    report = audit_tools([{"name": "odd", "input_schema": schema}, {"name": "fine", "input_schema": {
        "type": "object", "properties": {"q": {"type": "string"}}}}])
    for dialect, found in report.dialects.items():
        mine = [(x.tool, x.limit) for x in found.limits]
        if dialect in refused_by:
            assert not found.ok and mine == [("odd", limit)], dialect
        else:
            assert found.ok and mine == [], dialect


def test_declare_refuses_an_array_root_where_the_provider_would():
    """declare raises DeclarationLimitError (limit schema_root) for a tool whose input is an array, in a dialect that
    refuses it, instead of a request failing with HTTP 400."""
    with pytest.raises(DeclarationLimitError) as info:
        declare("anthropic", [{"name": "tags", "input_schema": {"type": "array", "items": {"type": "string"}}}])
    assert (info.value.tool, info.value.limit) == ("tags", "schema_root")
