"""toolwire.codecs.telemetry: the GenAI conventions' names of each dialect's requests and the request parameters
a body sets (no OpenTelemetry needed)."""

from __future__ import annotations

import pytest

from toolwire.codecs import dialects_with
from toolwire.codecs.requests import options_fragment, request_body
from toolwire.codecs.telemetry import OPERATION_NAMES, PROVIDER_NAMES, provider_name, request_attributes

#: the dialects the harness can call (their HTTP part names their requests)
PROVIDERS = tuple(d.id for d in dialects_with("http"))


def test_every_dialect_has_its_operation_and_provider_name():
    """generate_content for Gemini, chat for the others; openai, anthropic, gcp.gemini, aws.bedrock."""
    assert OPERATION_NAMES == {"openai-chat": "chat", "openai-responses": "chat", "anthropic": "chat",
                               "gemini": "generate_content", "gemini-interactions": "chat",
                               "bedrock-converse": "chat"}
    assert {p: provider_name(p, None) for p in PROVIDERS} == PROVIDER_NAMES
    assert set(PROVIDER_NAMES.values()) == {"openai", "anthropic", "gcp.gemini", "aws.bedrock"}


@pytest.mark.parametrize("dialect, host, name", [
    ("openai-chat", "api.openai.com", "openai"),
    ("openai-chat", "127.0.0.1", "openai"),
    ("openai-chat", "my-resource.openai.azure.com", "azure.ai.openai"),
    ("openai-chat", "API.GROQ.COM", "groq"),
    ("openai-chat", "api.deepseek.com.", "deepseek"),
    ("openai-chat", "generativelanguage.googleapis.com", "gcp.gemini"),
    ("gemini", "us-central1-aiplatform.googleapis.com", "gcp.vertex_ai"),
    ("gemini", "aiplatform.googleapis.com", "gcp.vertex_ai"),
    ("anthropic", "notaiplatform.googleapis.com.example", "anthropic"),
    ("openai-chat", "evilapi.groq.com.example", "openai"),
    ("gemini", "xaiplatform.googleapis.com", "gcp.gemini"),
])
def test_provider_name_follows_the_host_the_conventions_name(dialect, host, name):
    """A server the conventions name is recognised by its host or a subdomain of it, nothing else."""
    assert provider_name(dialect, host) == name


def _body(dialect: str, **options) -> dict:
    return request_body(dialect, model="m", history=[], tools_fragment=None, extra=options_fragment(
        dialect, temperature=0.5 if dialect != "anthropic" else None))


@pytest.mark.parametrize("dialect", PROVIDERS)
def test_request_parameters_are_read_where_each_dialect_puts_them(dialect):
    """The temperature option, in each dialect's own field, is gen_ai.request.temperature; the token limit a
    dialect always sends (Anthropic's max_tokens, Bedrock's inferenceConfig.maxTokens) is gen_ai.request.max_tokens."""
    attributes = request_attributes(dialect, _body(dialect))
    always = {"gen_ai.request.max_tokens": 1024} if dialect in ("anthropic", "bedrock-converse") else {}
    if dialect == "anthropic":
        assert attributes == always
    else:
        assert attributes == {**always, "gen_ai.request.temperature": 0.5}


@pytest.mark.parametrize("dialect, body, expected", [
    ("openai-chat", {"temperature": 1, "top_p": 0.9, "max_completion_tokens": 50, "max_tokens": 99, "stop": "END",
                     "seed": 7, "frequency_penalty": 0.1, "presence_penalty": -0.2, "n": 3},
     {"gen_ai.request.temperature": 1.0, "gen_ai.request.top_p": 0.9, "gen_ai.request.max_tokens": 50,
      "gen_ai.request.stop_sequences": ["END"], "gen_ai.request.seed": 7, "gen_ai.request.frequency_penalty": 0.1,
      "gen_ai.request.presence_penalty": -0.2, "gen_ai.request.choice.count": 3}),
    ("openai-chat", {"n": 1}, {}),
    ("gemini", {"generationConfig": {"topK": 40, "maxOutputTokens": 10, "stopSequences": ["a", "b"],
                                     "candidateCount": 2}},
     {"gen_ai.request.top_k": 40.0, "gen_ai.request.max_tokens": 10, "gen_ai.request.stop_sequences": ["a", "b"],
      "gen_ai.request.choice.count": 2}),
    ("gemini-interactions", {"generation_config": {"max_output_tokens": 5, "seed": 1}},
     {"gen_ai.request.max_tokens": 5, "gen_ai.request.seed": 1}),
    ("openai-responses", {"max_output_tokens": 20, "top_p": 1}, {"gen_ai.request.max_tokens": 20,
                                                                 "gen_ai.request.top_p": 1.0}),
    ("anthropic", {"max_tokens": 9, "top_k": 5, "stop_sequences": ["x"]},
     {"gen_ai.request.max_tokens": 9, "gen_ai.request.top_k": 5.0, "gen_ai.request.stop_sequences": ["x"]}),
])
def test_request_parameters_of_extra_body(dialect, body, expected):
    """Parameters an application adds through extra_body are reported too; n=1 is not."""
    assert request_attributes(dialect, body) == expected


def test_parameters_of_the_wrong_type_are_left_out():
    """What extra_body may hold that no attribute can: booleans, strings for numbers, nested objects, mixed
    lists, integers past 64 bits, a config that is not an object."""
    assert request_attributes("openai-chat", {"temperature": True, "top_p": "0.9", "seed": 1.5, "n": {"a": 1},
                                              "stop": ["a", 1], "max_tokens": 2 ** 70}) == {}
    assert request_attributes("gemini", {"generationConfig": ["temperature", 1]}) == {}
    assert request_attributes("gemini-interactions", {"generation_config": None}) == {}
    assert request_attributes("no-such-dialect", {"temperature": 1.0}) == {}
