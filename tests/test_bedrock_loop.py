"""Bedrock Converse end to end: the harness loop and ``toolwire chat`` against the simulated provider over real
loopback HTTP, authenticated with a Bedrock API key and with SigV4 (botocore signing from the AWS credentials in
the environment, the simulator verifying every attempt's signature)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

pytest.importorskip("botocore")

import toolwire  # noqa: E402
from toolwire.codecs import dialect_for  # noqa: E402
from toolwire.codecs._sim.bedrock_converse import KNOWN_CREDENTIALS  # noqa: E402
from toolwire.harness import AsyncToolLoop, RetryPolicy, ToolLoop  # noqa: E402
from toolwire.harness.demo_tools import DemoWorld  # noqa: E402
from toolwire.sim import SCENARIOS, Fault, SimProvider  # noqa: E402

try:
    _WIRED = dialect_for("bedrock-converse").http is not None and dialect_for("bedrock-converse").sim is not None
except toolwire.UsageError:
    _WIRED = False
pytestmark = pytest.mark.skipif(not _WIRED, reason="the bedrock-converse record does not name its HTTP and "
                                                   "simulator parts")

MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
FAST = RetryPolicy(attempts=4, deadline=20.0, initial=0.01, max_backoff=0.05)
KEY_ID, SECRET = next(iter(KNOWN_CREDENTIALS.items()))
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def sim():
    provider = SimProvider(seed=5)
    with provider.serve() as base_url:
        provider.base_url = base_url
        yield provider


def _clean_aws(monkeypatch, tmp_path) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def sigv4_env(monkeypatch, tmp_path):
    """AWS credentials (the example pair the simulator knows, with a session token) and a region; no API key."""
    _clean_aws(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token-for-the-simulator")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    return monkeypatch


def _signed(sim) -> list[str]:
    return [r.headers.get("x-amz-date", "") for r in sim.requests if r.dialect == "bedrock-converse"]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_the_loop_signs_every_request_with_sigv4(sim, sigv4_env, stream):
    """No key: every request of a two-call conversation is SigV4-signed and verified by the simulator, a retried
    one too (a planned 503 first); the answer uses both results."""
    world = DemoWorld()
    sim.plan([Fault.status(503)], dialect="bedrock-converse")
    with ToolLoop("bedrock-converse", model=MODEL, registry=world.registry(), base_url=sim.base_url, retry=FAST,
                  stream=stream) as loop:
        result = loop.run(SCENARIOS["height_weight"].prompts["en"])
    assert not result.fallback and "170 cm" in result.answer and "70 kg" in result.answer
    assert [r.status for r in sim.requests] == [503, 200, 200]
    assert all(_signed(sim)) and all(r.headers.get("x-amz-security-token") for r in sim.requests)


def test_the_async_loop_signs_streamed_requests(sim, sigv4_env):
    """The async loop, streamed, signed with SigV4: the write runs once, the model's answer comes back."""
    world = DemoWorld()

    async def main():
        async with AsyncToolLoop("bedrock-converse", model=MODEL, registry=world.registry(), base_url=sim.base_url,
                                 retry=FAST) as loop:
            return await loop.run(SCENARIOS["save_with_faults"].prompts["en"])

    result = anyio.run(main)
    assert not result.fallback and "70 kg" in result.answer and world.effects.count("save_measurement") == 1
    assert all(_signed(sim))


def test_a_signature_the_service_refuses_fails_fast(sim, sigv4_env):
    """Credentials the simulator does not know: 403 UnrecognizedClientException, permanent: one request, then the
    fallback answer."""
    sigv4_env.setenv("AWS_ACCESS_KEY_ID", "AKIAUNKNOWNKEY000000")
    with ToolLoop("bedrock-converse", model=MODEL, registry=DemoWorld().registry(), base_url=sim.base_url,
                  retry=FAST) as loop:
        result = loop.run(SCENARIOS["height"].prompts["en"])
    assert result.fallback and [r.status for r in sim.requests] == [403]


def test_a_bedrock_api_key_goes_as_bearer(sim, monkeypatch, tmp_path):
    """AWS_BEARER_TOKEN_BEDROCK: the requests carry the key and no signature."""
    _clean_aws(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-0123456789")
    with ToolLoop("bedrock-converse", model=MODEL, registry=DemoWorld().registry(), base_url=sim.base_url,
                  retry=FAST) as loop:
        result = loop.run(SCENARIOS["height"].prompts["en"])
    assert not result.fallback and "170 cm" in result.answer
    assert not any(_signed(sim))


def test_toolwire_chat_with_sigv4_credentials_in_its_environment(sim, tmp_path):
    """toolwire chat in a process of its own, with fake AWS credentials in its environment and no key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=SECRET, AWS_REGION="eu-west-1",
               AWS_CONFIG_FILE=str(tmp_path / "c"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "k"),
               AWS_EC2_METADATA_DISABLED="true", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "toolwire", "chat", "--provider", "bedrock-converse", "--model",
                          MODEL, "--tools", "tests.chat_tools", "--base-url", sim.base_url, "--json",
                          SCENARIOS["height_weight"].prompts["en"]], capture_output=True, text=True, cwd=ROOT,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert not doc["fallback"] and "170 cm" in doc["answer"]
    assert [r.status for r in sim.requests] == [200, 200] and all(_signed(sim))


def test_toolwire_chat_without_key_or_credentials_says_both_ways(tmp_path):
    """Neither a key nor credentials: one line on stderr naming both ways, exit code 2."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_REGION="us-east-1", AWS_CONFIG_FILE=str(tmp_path / "c"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "k"), AWS_EC2_METADATA_DISABLED="true",
               PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "toolwire", "chat", "--provider", "bedrock-converse", "--model",
                          MODEL, "--tools", "tests.chat_tools", "hi"], capture_output=True, text=True, cwd=ROOT,
                         env=env, timeout=120)
    assert out.returncode == 2 and "AWS_BEARER_TOKEN_BEDROCK" in out.stderr and "AWS_ACCESS_KEY_ID" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
