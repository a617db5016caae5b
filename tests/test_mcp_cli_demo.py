"""``toolwire chat --mcp`` and the ``mcp_notes`` demo scenario: tools from real MCP server processes, through the
whole loop on the simulated provider, for every dialect."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("mcp")

from .dialects import SIMULATED as PROVIDERS  # noqa: E402 - the dialects the loop can call on the simulator
from toolwire.harness.demo import run_demo, runs_to_json  # noqa: E402
from toolwire.sim import SCENARIOS, SimProvider  # noqa: E402

from .conftest import ROOT  # noqa: E402
from .mcp_helpers import TOKEN, HttpServerProcess  # noqa: E402

DEMO_SERVER = f"{sys.executable} -m toolwire.harness.demo_mcp_server"
PROMPT = SCENARIOS["mcp_notes"].prompts["en"]


def chat(*args: str, base_url: str, provider: str = "anthropic") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), ANTHROPIC_API_KEY="sim-key", OPENAI_API_KEY="sim-key",
               GEMINI_API_KEY="sim-key")
    return subprocess.run([sys.executable, "-m", "toolwire", "chat", "--provider", provider, "--model", "sim-model",
                           "--base-url", base_url, "--json", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=180, check=False)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_demo_mcp_notes_runs_for_every_dialect(provider):
    """The mcp_notes scenario: add_note (a write) then list_notes (a read) on the demo MCP server process, the
    note in the answer, one note written."""
    [run] = run_demo([provider], ["mcp_notes"], "en")
    assert not run.result.fallback, run.result.answer
    assert run.result.answer == "Noted. Your notes: Drank two glasses of water."
    assert [(c.name, c.result_kind) for c in run.result.calls] == [("add_note", "ok"), ("list_notes", "ok")]
    assert run.effects == {"add_note": 1}
    assert runs_to_json([run])["runs"][0]["effects"] == {"add_note": 1}


def test_chat_takes_its_tools_from_an_mcp_command_without_tools():
    """toolwire chat --mcp COMMAND: no --tools needed; the model's calls go to the server process."""
    sim = SimProvider()
    with sim.serve() as base_url:
        proc = chat("--mcp", DEMO_SERVER, PROMPT, base_url=base_url)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["answer"] == "Noted. Your notes: Drank two glasses of water."
    assert [(c["name"], c["result_kind"]) for c in doc["calls"]] == [("add_note", "ok"), ("list_notes", "ok")]


def test_chat_mixes_tools_and_an_http_mcp_server_with_a_header(tmp_path):
    """--tools and --mcp URL with --mcp-header together; the server's bad tools are reported on stderr, the
    token never is."""
    proc_server = HttpServerProcess(tmp_path / "state")
    proc_server.start()
    try:
        (tmp_path / "mytools.py").write_text(
            "from toolwire.harness.demo_tools import DemoWorld\n\nTOOLS = DemoWorld().tools()\n")
        sim = SimProvider()
        with sim.serve() as base_url:
            env_root = str(tmp_path)
            proc = subprocess.run(
                [sys.executable, "-m", "toolwire", "chat", "--provider", "anthropic", "--model", "m", "--base-url",
                 base_url, "--json", "--tools", "mytools", "--mcp", proc_server.url, "--mcp-header",
                 f"Authorization: Bearer {TOKEN}", SCENARIOS["height"].prompts["en"]],
                cwd=env_root, env=dict(os.environ, PYTHONPATH=str(ROOT), ANTHROPIC_API_KEY="sim-key"),
                capture_output=True, text=True, timeout=180, check=False)
    finally:
        proc_server.stop()
    assert proc.returncode == 0, proc.stderr
    assert "170 cm" in json.loads(proc.stdout)["answer"]
    assert "left out 'anyof_root'" in proc.stderr and TOKEN not in proc.stderr + proc.stdout


@pytest.mark.parametrize("args, code, message", [
    ((), 2, "--tools MODULE, one or more --mcp"),
    (("--mcp-header", "A: b", "--tools", "tests.chat_tools"), 2, "go with --mcp"),
    (("--mcp", DEMO_SERVER, "--mcp-header", "novalue"), 2, "NAME:VALUE"),
    (("--mcp", DEMO_SERVER, "--mcp", DEMO_SERVER), 2, "two tools are named"),
    (("--mcp", "/no/such/mcp-server --flag"), 1, "cannot connect to the MCP server /no/such/mcp-server --flag"),
    (("--mcp", "python 'unbalanced"), 2, "cannot split the MCP server command"),
    (("--mcp", ""), 2, "not an empty string"),
])
def test_chat_mcp_misuse_is_one_line_and_an_exit_code(args, code, message):
    """Missing tools, bad --mcp options, colliding names: exit 2; a server that cannot start: exit 1."""
    proc = chat(*args, PROMPT, base_url="http://127.0.0.1:9")
    assert proc.returncode == code, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_async_loop_with_async_handlers_of_the_demo_server(provider):
    """async with MCPServer, aregistry() and AsyncToolLoop: the same conversation as the sync demo."""
    import asyncio

    from toolwire.harness import AsyncToolLoop
    from toolwire.harness.demo import demo_mcp_server

    async def main(base_url: str):
        async with demo_mcp_server() as server:
            registry = await server.aregistry(dialects=[provider], trust_read_only=True)
            assert all(t.is_async for t in registry)
            async with AsyncToolLoop(provider, model="sim-model", registry=registry, base_url=base_url,
                                     api_key="sim-key") as loop:
                result = await loop.run(PROMPT)
            notes = await registry["list_notes"].invoke({})
        return result, notes

    sim = SimProvider()
    with sim.serve() as base_url:
        result, notes = asyncio.run(main(base_url))
    assert result.answer == "Noted. Your notes: Drank two glasses of water."
    assert notes.structured == {"notes": ["Drank two glasses of water"]}


def test_demo_mcp_scenario_is_refused_on_workers():
    """toolwire demo --scenario mcp_notes --workers N: a usage error (its server is a process of the run)."""
    proc = subprocess.run([sys.executable, "-m", "toolwire", "demo", "--scenario", "mcp_notes", "--workers", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and "does not run with --workers" in proc.stderr
