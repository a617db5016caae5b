"""Amazon Bedrock Converse over HTTP: ``POST {base}/model/{modelId}/converse-stream`` (an AWS event stream) or
``/converse`` (one JSON body).

* The model id is one path segment, percent-encoded as the AWS SDKs encode it (``:`` of a versioned id and ``/``
  of an ARN or an inference profile become ``%3A`` and ``%2F``); the body never names it. An empty id, ``.`` or
  ``..`` is no path segment (a client would send the request to another path): a ``UsageError``.
* The base URL: ``base_url=``, else ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``, else ``AWS_ENDPOINT_URL`` (the AWS SDKs'
  endpoint variables; ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`` turns both off, as in the SDKs), else
  ``https://bedrock-runtime.{region}.amazonaws.com``. The region: ``AWS_REGION``, else ``AWS_DEFAULT_REGION``, else
  the region of the AWS profile (read by botocore, when it is installed). Without a base URL and without a region
  the endpoint is a ``UsageError``.
* Authentication, first that applies: a Bedrock API key (``api_key=``, else ``AWS_BEARER_TOKEN_BEDROCK``) as
  ``Authorization: Bearer``; else AWS Signature Version 4 (service ``bedrock``, the region) over the exact bytes of
  every attempt, with the credentials botocore's chain finds (environment variables, a profile, SSO, a container or
  instance role: the ``bedrock`` extra); else a ``UsageError`` naming both ways. The signature, the session token
  and the secret key are never logged, botocore's own DEBUG records of its signing included (a filter on the
  ``botocore.auth`` logger takes the token and the signature out of them).
* The body: ``messages`` (the history), ``system`` as ``[{"text": ...}]``, ``inferenceConfig`` (``maxTokens``,
  ``temperature`` from 0 to 1), the declarations' ``toolConfig`` merged in.
* The response's id: a Converse body has none; the ``x-amzn-RequestId`` header is it (``response_id``).
* Errors: the body is ``{"message": ...}`` and the type is in the ``x-amzn-ErrorType`` header
  (``ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/``); throttling, a model not ready,
  a model timeout, an unavailable service and an internal error are transient, a validation error, a denied or
  unrecognised client, a missing resource and a model error (424) are permanent (botocore's ``bedrock-runtime``
  model and the Bedrock API reference, "Errors" of ``Converse``).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import msgspec

from ... import _log
from ...errors import UsageError
from ..capabilities import Capabilities
from ..requests import HTTP, Endpoint, ProviderErrorInfo, _header_delay, checked_base_url, merge_body

__all__ = ["BedrockConverseHTTP", "PART", "ERROR_CLASSES", "region"]

#: error types (the ``x-amzn-ErrorType`` name) → transient; the types botocore's model lists for Converse and
#: ConverseStream, and the authentication errors AWS answers before any operation runs
ERROR_CLASSES: Mapping[str, bool] = {
    "ThrottlingException": True,
    "ServiceUnavailableException": True,
    "InternalServerException": True,
    "ModelNotReadyException": True,
    "ModelTimeoutException": True,
    "ModelStreamErrorException": True,
    "ValidationException": False,
    "AccessDeniedException": False,
    "ResourceNotFoundException": False,
    "ModelErrorException": False,
    "ServiceQuotaExceededException": False,
    "UnrecognizedClientException": False,
    "InvalidSignatureException": False,
    "ExpiredTokenException": False,
    "IncompleteSignatureException": False,
    "MissingAuthenticationTokenException": False,
}
_ENDPOINT_ENV = ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "AWS_ENDPOINT_URL")
#: the environment a botocore session reads credentials and the region from: a change makes a new session
_AWS_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
            "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_DEFAULT_REGION", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN")
_SIGNING_NAME = "bedrock"


class _ScrubSigning(logging.Filter):
    """botocore's SigV4 signer logs, at DEBUG, its canonical request (with the ``x-amz-security-token`` header, the
    session token) and the signature: both are taken out of its records before any handler sees them."""

    _SIGNATURE = re.compile(r"(Signature[=:]\s*)[0-9a-f]{64}")
    _TOKEN = re.compile(r"(x-amz-security-token:)[^\n]*", re.IGNORECASE)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that does not format is left to logging
            return True
        clean = _log.scrub(self._SIGNATURE.sub(r"\1[redacted]", self._TOKEN.sub(r"\1[redacted]", text)))
        if clean != text:
            record.msg, record.args = clean, None
        return True


_SCRUB_SIGNING = _ScrubSigning()


def _scrub_botocore_logs() -> None:
    logger = logging.getLogger("botocore.auth")
    if _SCRUB_SIGNING not in logger.filters:
        logger.addFilter(_SCRUB_SIGNING)


class _AWS(msgspec.Struct, frozen=True):
    """What botocore found: its credentials object (refreshes itself) or None, and the profile's region."""

    credentials: Any
    region: str | None
    botocore: bool


_cache: tuple[tuple[str | None, ...], _AWS] | None = None
_cache_lock = threading.Lock()


def _aws() -> _AWS:
    """The AWS credentials and region botocore's chain finds (once per distinct AWS environment)."""
    global _cache
    key = tuple(os.environ.get(name) for name in _AWS_ENV)
    with _cache_lock:
        if _cache is not None and _cache[0] == key:
            return _cache[1]
        try:
            import botocore.exceptions
            import botocore.session
        except ImportError:
            found = _AWS(None, None, False)
        else:
            try:
                session = botocore.session.Session()
                region_name = session.get_config_variable("region")
                credentials = session.get_credentials()
            except botocore.exceptions.BotoCoreError as exc:  # a profile that does not exist, a broken config
                raise UsageError(f"bedrock-converse: botocore cannot read the AWS configuration: {exc}") from None
            found = _AWS(credentials, region_name or None, True)
        _cache = (key, found)
        return found


def region() -> str | None:
    """The AWS region: ``AWS_REGION``, ``AWS_DEFAULT_REGION``, else the profile's (through botocore), else None."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return _aws().region


def _endpoint_from_env() -> str | None:
    if os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").strip().lower() == "true":
        return None
    for name in _ENDPOINT_ENV:
        value = os.environ.get(name, "").strip()
        if value:
            return checked_base_url(value, name, key_in_authorization="bedrock-converse")
    return None


class BedrockConverseHTTP(HTTP):
    api_key_env = ("AWS_BEARER_TOKEN_BEDROCK",)
    base_url_env = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"
    default_base_url = "https://bedrock-runtime.{region}.amazonaws.com"
    secret_headers = ("authorization", "x-amz-security-token")
    max_temperature = 1.0
    provider_name = "aws.bedrock"
    request_fields = (
        (("inferenceConfig", "temperature"), "gen_ai.request.temperature", "double"),
        (("inferenceConfig", "topP"), "gen_ai.request.top_p", "double"),
        (("inferenceConfig", "maxTokens"), "gen_ai.request.max_tokens", "int"),
        (("inferenceConfig", "stopSequences"), "gen_ai.request.stop_sequences", "strings"),
    )

    # ---- the endpoint ----------------------------------------------------------------------------------------
    def url(self, base: str, *, model: str, stream: bool) -> str:
        if model in ("", ".", ".."):  # no path segment: /model/../converse-stream is /converse-stream
            raise UsageError(f"bedrock-converse: the model id {model!r} cannot be a path segment; pass a model id, "
                             "an inference profile or an ARN")
        return f"{base}/model/{quote(model, safe='-._~')}/{'converse-stream' if stream else 'converse'}"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"}

    def api_key(self, api_key: str | None) -> str | None:
        """A Bedrock API key (``api_key``, else ``AWS_BEARER_TOKEN_BEDROCK``); None when botocore finds AWS
        credentials to sign with. Raises ``UsageError`` with neither."""
        if api_key:
            return api_key
        value = os.environ.get("AWS_BEARER_TOKEN_BEDROCK")
        if value:
            return value
        found = _aws()
        if found.credentials is not None:
            return None
        how = ("botocore found no AWS credentials" if found.botocore
               else "botocore is not installed (pip install 'toolwire[bedrock]')")
        raise UsageError("no credentials for bedrock-converse: pass api_key= or set AWS_BEARER_TOKEN_BEDROCK (a Bedrock "
                         "API key), or configure AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a "
                         f"profile, a role) for SigV4 signing with botocore; {how}")

    def endpoint(self, *, model: str, stream: bool = True, base_url: str | None = None,
                 api_key: str | None = None) -> Endpoint:
        where = region()
        base = checked_base_url(base_url, "base_url", key_in_authorization="bedrock-converse") if base_url is not None else _endpoint_from_env()
        if not base:
            if where is None:
                raise UsageError("no AWS region for bedrock-converse: set AWS_REGION (or AWS_DEFAULT_REGION, or a "
                                 "region in the AWS profile), or pass base_url=")
            base = self.default_base_url.format(region=where)
        ep = super().endpoint(model=model, stream=stream, base_url=base, api_key=api_key)
        if "authorization" not in ep.headers and where is None:
            raise UsageError("SigV4 signing needs an AWS region: set AWS_REGION (or AWS_DEFAULT_REGION, or a region "
                             "in the AWS profile), or use a Bedrock API key")
        return ep

    # ---- signing ---------------------------------------------------------------------------------------------
    def sign(self, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        """SigV4 (service ``bedrock``) over ``body`` when no API key is in ``headers``; a new signature, with its
        own ``x-amz-date``, for every attempt."""
        if "authorization" in headers:
            return headers
        credentials = _aws().credentials
        where = region()
        if credentials is None or where is None:
            raise UsageError("bedrock-converse: the AWS credentials or region are gone since the transport was made")
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        _scrub_botocore_logs()

        request = AWSRequest(method=method, url=url, data=body, headers=headers)
        SigV4Auth(credentials.get_frozen_credentials(), _SIGNING_NAME, where).add_auth(request)
        return {k: v for k, v in request.headers.items()}

    def secrets(self) -> tuple[str, ...]:
        credentials = _aws().credentials
        if credentials is None:
            return ()
        frozen = credentials.get_frozen_credentials()
        return tuple(v for v in (frozen.access_key, frozen.secret_key, frozen.token) if v)

    # ---- the body --------------------------------------------------------------------------------------------
    def body(self, *, model: str, history: list[Any], tools_fragment: dict[str, Any], stream: bool,
             system: str | None, max_tokens: int, previous_id: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"messages": list(history)}
        if system:
            body["system"] = [{"text": system}]
        body["inferenceConfig"] = {"maxTokens": max_tokens}
        return merge_body(body, tools_fragment)

    def option_fields(self, temperature: float | None, reasoning_effort: str | None) -> list[dict[str, Any]]:
        return [{"inferenceConfig": {"temperature": temperature}}] if temperature is not None else []

    # ---- the response ----------------------------------------------------------------------------------------
    def response_id(self, headers: Mapping[str, str]) -> str | None:
        """The ``x-amzn-RequestId`` header: a Converse body carries no id of its own."""
        for name, value in headers.items():
            if name.lower() == "x-amzn-requestid":
                return value
        return None

    # ---- errors ----------------------------------------------------------------------------------------------
    def parse_error(self, cap: Capabilities, status: int, headers: Mapping[str, str], body: bytes
                    ) -> ProviderErrorInfo:
        """The type from ``x-amzn-ErrorType`` (else the body's ``__type`` or ``code``), the body's ``message``;
        transient by type when the type is known, else by status (408, 429 and 5xx are)."""
        low = {k.lower(): v for k, v in headers.items()}
        etype = low.get("x-amzn-errortype", "").split(":", 1)[0].strip()
        try:
            doc = msgspec.json.decode(body) if body else None
        except msgspec.DecodeError:
            doc = None
        message = ""
        if isinstance(doc, dict):
            message = str(doc.get("message") or doc.get("Message") or "")
            if not etype:
                raw = doc.get("__type") or doc.get("code") or doc.get("Code") or ""
                etype = str(raw).rsplit("#", 1)[-1].split(":", 1)[0].strip()
        if etype in ERROR_CLASSES:
            transient = ERROR_CLASSES[etype]
        else:
            transient = status in (408, 429) or status in cap.transient_statuses \
                or (status >= 500 and status not in cap.permanent_statuses)
        return ProviderErrorInfo(status=status, type=etype or f"http_{status}", message=message[:500],
                                 transient=transient, retry_after=_header_delay(headers))


PART = BedrockConverseHTTP("bedrock-converse")
