"""Bedrock Converse attacked from outside: whole bodies that bend the shape, model ids that are no path segment,
and botocore's own signing log. Each test names the failure mode of docs/failure-modes.md it pins (52)."""

from __future__ import annotations

import io
import json
import logging
import os

import pytest

import toolwire
from toolwire.codecs import dialect_for

pytest.importorskip("botocore")

PROVIDER = "bedrock-converse"


def _body(content: list, stop: str = "tool_use") -> bytes:
    return json.dumps({"output": {"message": {"role": "assistant", "content": content}}, "stopReason": stop,
                       "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}}).encode()


def test_a_whole_body_tool_input_given_as_a_json_string_is_not_an_object():
    """A Converse body whose toolUse input is a string holding JSON is a string, never parsed again into an object
    that runs."""
    turn = toolwire.parse(PROVIDER, _body([{"toolUse": {"toolUseId": "t1", "name": "f", "input": '{"a": 1}'}}]))
    assert turn.runnable_calls == []
    (call,) = turn.calls
    assert call.args is None and call.problem is not None and call.problem.code.value == "not_an_object"


def test_a_whole_body_tool_block_that_is_not_an_object_is_a_protocol_error():
    """``{"toolUse": [...]}`` in a Converse body is refused as a protocol error, not skipped as if the turn had
    no call."""
    turn = toolwire.parse(PROVIDER, _body([{"toolUse": ["f"]}, {"toolUse": {"toolUseId": "t2", "name": "g",
                                                                            "input": {}}}]))
    assert turn.runnable_calls == []
    assert turn.error is not None and turn.error.type == "protocol_error"


@pytest.mark.parametrize("model", ["", ".", ".."])
def test_a_model_id_that_is_no_path_segment_is_a_usage_error(model):
    """An empty model id, ``.`` or ``..`` would send the request to another path (``/model/../converse-stream``
    is ``/converse-stream``): a UsageError, before any request."""
    http = dialect_for(PROVIDER).http
    with pytest.raises(toolwire.UsageError, match="model"):
        http.endpoint(model=model, base_url="http://127.0.0.1:9", api_key="k")


def test_botocore_signing_logs_carry_no_session_token_nor_signature(monkeypatch, tmp_path):
    """With every logger at DEBUG, botocore's SigV4 records (its canonical request names the session token, and it
    logs the signature) reach no handler with either."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token-that-must-stay-secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    from toolwire.harness.transport import HTTPTransport

    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    root = logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        transport = HTTPTransport(PROVIDER, model="m", base_url="http://127.0.0.1:9")
        http = dialect_for(PROVIDER).http
        signed = http.sign("POST", "http://127.0.0.1:9/model/m/converse-stream",
                           {"content-type": "application/json"}, b"{}")
        transport.close()
    finally:
        root.removeHandler(handler)
        root.setLevel(old)
    signature = signed["Authorization"].rsplit("Signature=", 1)[1]
    text = buf.getvalue()
    assert "botocore.auth" in text  # botocore did log its signing
    assert "session-token-that-must-stay-secret" not in text
    assert signature not in text
