"""Calling Amazon Bedrock Converse over HTTP (``toolwire/codecs/http/bedrock_converse.py``): URLs, bodies, errors,
the base URL and region, and both ways to authenticate, checked against botocore's ``bedrock-runtime`` model and
SigV4 implementation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

botocore = pytest.importorskip("botocore")

import botocore.serialize  # noqa: E402
import botocore.session  # noqa: E402
from botocore.validate import ParamValidator  # noqa: E402

import toolwire  # noqa: E402
from toolwire.codecs.capabilities import Capabilities, Limit  # noqa: E402
from toolwire.codecs.http import bedrock_converse as bedrock  # noqa: E402
from toolwire.codecs.http.bedrock_converse import PART  # noqa: E402

MODEL = botocore.session.get_session().get_service_model("bedrock-runtime")
FIXTURES = Path(__file__).parent / "fixtures" / "real" / "bedrock-converse"
CAP = Capabilities(dialect="bedrock-converse", endpoint="", name_pattern="", name_max=64, name_source="",
                   max_tools=Limit(None, ""), schema_depth=Limit(None, ""), max_request_bytes=Limit(None, ""),
                   ids_echoed="", signatures="", tool_turn_finish=(), transient_statuses=(408, 429, 500, 502, 503, 504),
                   permanent_statuses=(400, 401, 403, 404), transient_error_types=(), delay_hints=())
FAKE_KEY, FAKE_SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    """An environment with no AWS configuration at all (no files, no instance metadata, no key)."""
    for name in list(__import__("os").environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return monkeypatch


@pytest.mark.parametrize("model_id", ["us.amazon.nova-2-lite-v1:0", "anthropic.claude-3-sonnet-20240229-v1:0",
                                      "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude",
                                      "my model~1"])
@pytest.mark.parametrize("stream", [True, False])
def test_the_url_encodes_the_model_id_as_botocore_does(model_id, stream):
    """The model id is one path segment, percent-encoded exactly as botocore serialises the modelId label."""
    op = MODEL.operation_model("ConverseStream" if stream else "Converse")
    expected = botocore.serialize.create_serializer("rest-json").serialize_to_request(
        {"modelId": model_id, "messages": []}, op)["url_path"]
    assert PART.url("https://h", model=model_id, stream=stream) == "https://h" + expected


def test_the_body_fits_the_converse_request_shape():
    """messages, system, inferenceConfig (with a temperature option) and the toolConfig fragment merged in: a
    request botocore's ParamValidator accepts once the modelId (a URL label) is added; no modelId in the body."""
    fragment = {"toolConfig": {"tools": [{"toolSpec": {"name": "get_weather", "description": "w",
                                                       "inputSchema": {"json": {"type": "object"}}}}],
                               "toolChoice": {"auto": {}}}}
    body = toolwire.codecs.requests.merge_body(
        PART.body(model="m", history=[{"role": "user", "content": [{"text": "hi"}]}], tools_fragment=fragment,
                  stream=True, system="Be brief.", max_tokens=300, previous_id=None),
        PART.options(temperature=0.3))
    assert body == {"messages": [{"role": "user", "content": [{"text": "hi"}]}], "system": [{"text": "Be brief."}],
                    "inferenceConfig": {"maxTokens": 300, "temperature": 0.3}, **fragment}
    report = ParamValidator().validate({**body, "modelId": "m"}, MODEL.operation_model("Converse").input_shape)
    assert not report.has_errors(), report.generate_report()


def test_temperature_is_checked_against_the_models_range():
    """The model's range for inferenceConfig.temperature (0 to 1) is the one options() enforces."""
    shape = MODEL.shape_for("InferenceConfiguration").members["temperature"]
    assert PART.max_temperature == shape.metadata["max"]
    with pytest.raises(toolwire.UsageError, match="from 0 to 1"):
        PART.options(temperature=1.2)


def _error_shapes() -> list[tuple[str, int]]:
    return [(e.name, e.metadata["error"]["httpStatusCode"])
            for e in MODEL.operation_model("ConverseStream").error_shapes]


TRANSIENT = {"ThrottlingException", "ServiceUnavailableException", "InternalServerException", "ModelNotReadyException",
             "ModelTimeoutException"}


@pytest.mark.parametrize("name,status", _error_shapes())
def test_every_modelled_error_is_classified(name, status):
    """Each error botocore's model lists for Converse/ConverseStream is read from x-amzn-ErrorType with its status:
    throttling, a model not ready, a model timeout, an unavailable service, an internal error are transient; the
    rest (validation, access denied, not found, the model's own error) permanent."""
    info = PART.parse_error(CAP, status, {"x-amzn-ErrorType": f"{name}:http://internal.amazon.com/coral/"
                                                               "com.amazon.bedrock/"}, b'{"message":"why"}')
    assert (info.type, info.message, info.transient) == (name, "why", name in TRANSIENT)
    assert name in bedrock.ERROR_CLASSES


@pytest.mark.parametrize("file", sorted(p.name for p in FIXTURES.glob("*error*.json")))
def test_the_recorded_error_bodies_are_read(file):
    """The recorded error bodies with the status and type their cassettes recorded: all permanent."""
    facts = {m["file"]: m for m in json.loads((FIXTURES / "manifest.json").read_text())}[file]
    info = PART.parse_error(CAP, facts["status"], {"X-Amzn-ErrorType": facts["error_type"]},
                            (FIXTURES / file).read_bytes())
    assert info.type == facts["error_type"] and not info.transient and info.message


def test_an_error_without_a_type_header_is_classified_by_the_body_or_status():
    """A body's __type names the error when the header is missing; with neither, the status decides."""
    info = PART.parse_error(CAP, 400, {}, b'{"__type":"com.amazon.coral.service#ThrottlingException","message":"x"}')
    assert info.type == "ThrottlingException" and info.transient
    assert PART.parse_error(CAP, 502, {}, b"<html>").transient
    assert not PART.parse_error(CAP, 400, {}, b"").transient
    assert PART.parse_error(CAP, 429, {"retry-after": "2"}, b"{}").retry_after == 2.0


def test_the_base_url_comes_from_the_sdk_variables_or_the_region(aws_env):
    """AWS_ENDPOINT_URL_BEDROCK_RUNTIME wins over AWS_ENDPOINT_URL; without either the regional host of AWS_REGION
    (or AWS_DEFAULT_REGION); AWS_IGNORE_CONFIGURED_ENDPOINT_URLS turns the variables off."""
    aws_env.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-123456")
    aws_env.setenv("AWS_DEFAULT_REGION", "eu-west-3")
    assert PART.endpoint(model="m", stream=False).url == "https://bedrock-runtime.eu-west-3.amazonaws.com/model/m/converse"
    aws_env.setenv("AWS_REGION", "us-west-2")
    assert PART.endpoint(model="m", stream=False).url.startswith("https://bedrock-runtime.us-west-2.amazonaws.com/")
    aws_env.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1/all")
    assert PART.endpoint(model="m", stream=False).url == "http://127.0.0.1:1/all/model/m/converse"
    aws_env.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "http://127.0.0.1:2/")
    assert PART.endpoint(model="m", stream=False).url == "http://127.0.0.1:2/model/m/converse"
    aws_env.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert PART.endpoint(model="m", stream=False).url.startswith("https://bedrock-runtime.us-west-2.amazonaws.com/")
    ep = PART.endpoint(model="m", stream=False, base_url="http://127.0.0.1:3", api_key="explicit-key-123")
    assert ep.url == "http://127.0.0.1:3/model/m/converse" and ep.headers["authorization"] == "Bearer explicit-key-123"


def test_without_a_region_or_a_base_url_the_endpoint_is_a_usage_error(aws_env):
    """No region anywhere and no base URL: a UsageError saying where a region comes from."""
    with pytest.raises(toolwire.UsageError, match="AWS_REGION"):
        PART.endpoint(model="m", stream=False, api_key="k-123456789")


def test_neither_a_key_nor_credentials_is_a_usage_error_naming_both_ways(aws_env):
    """With no API key and no AWS credentials the error names the key, its variable and the credentials."""
    aws_env.setenv("AWS_REGION", "us-east-1")
    with pytest.raises(toolwire.UsageError) as err:
        PART.endpoint(model="m", stream=False)
    text = str(err.value)
    assert "AWS_BEARER_TOKEN_BEDROCK" in text and "api_key=" in text and "AWS_ACCESS_KEY_ID" in text
    assert "botocore found no AWS credentials" in text


def test_without_a_key_botocore_credentials_sign_the_request(aws_env):
    """With AWS credentials in the environment and no key, the endpoint has no auth header and sign() adds a SigV4
    Authorization for service bedrock in the region, with x-amz-date and the session token, which an independent
    SigV4 implementation verifies over the exact bytes; secrets() names the secret key and the token."""
    from email.message import Message

    from toolwire.codecs._sim.bedrock_converse import sigv4_signature

    aws_env.setenv("AWS_REGION", "eu-central-1")
    aws_env.setenv("AWS_ACCESS_KEY_ID", FAKE_KEY)
    aws_env.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET)
    aws_env.setenv("AWS_SESSION_TOKEN", "session-token-abcdefgh")
    ep = PART.endpoint(model="us.amazon.nova-2-lite-v1:0", stream=False, base_url="http://127.0.0.1:8080")
    assert "authorization" not in ep.headers
    body = json.dumps({"messages": [{"role": "user", "content": [{"text": "hé"}]}]}).encode()
    signed = PART.sign("POST", ep.url, dict(ep.headers), body)
    auth = signed["Authorization"]
    assert auth.startswith(f"AWS4-HMAC-SHA256 Credential={FAKE_KEY}/") and "/eu-central-1/bedrock/aws4_request" in auth
    assert signed["X-Amz-Security-Token"] == "session-token-abcdefgh"
    params = dict(p.strip().split("=", 1) for p in auth.split(" ", 1)[1].split(","))
    headers = Message()
    for k, v in {**signed, "host": "127.0.0.1:8080"}.items():
        headers[k] = v
    again = sigv4_signature(FAKE_SECRET, method="POST", path="/model/us.amazon.nova-2-lite-v1%3A0/converse", query={},
                            headers=headers, signed=params["SignedHeaders"].split(";"), body=body,
                            stamp=signed["X-Amz-Date"], scope=params["Credential"].split("/", 1)[1])
    assert again == params["Signature"]
    assert set(PART.secrets()) == {FAKE_KEY, FAKE_SECRET, "session-token-abcdefgh"}
    with_key = {**ep.headers, "authorization": "Bearer k"}
    assert PART.sign("POST", ep.url, with_key, body) == with_key  # a key: nothing to sign


def test_signing_needs_a_region(aws_env):
    """Credentials but no region, with a base URL: SigV4 cannot be scoped, a UsageError says so."""
    aws_env.setenv("AWS_ACCESS_KEY_ID", FAKE_KEY)
    aws_env.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET)
    with pytest.raises(toolwire.UsageError, match="needs an AWS region"):
        PART.endpoint(model="m", stream=False, base_url="http://127.0.0.1:9")


def test_tracing_names():
    """gen_ai.provider.name aws.bedrock; request fields read under inferenceConfig."""
    assert PART.provider_name == "aws.bedrock" and PART.operation_name == "chat"
    fields = {attr: path for path, attr, _ in PART.request_fields}
    assert fields["gen_ai.request.temperature"] == ("inferenceConfig", "temperature")
    assert fields["gen_ai.request.max_tokens"] == ("inferenceConfig", "maxTokens")
