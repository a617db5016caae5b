"""Authorization: the policy's decision, approval requests and approval tokens.

A policy is any callable ``policy(call, context) -> Decision`` (or the strings ``"allow"``, ``"deny"``,
``"needs_approval"``, or a bool). A tool's name never grants permission: only the policy's decision and, for
``needs_approval``, a verified ``Approval`` let a call run.

An ``approval_required`` result carries an ``ApprovalRequest`` bound to one call *instance* (conversation id,
turn identity, call id, tool name, sha256 of the canonical arguments JSON) and signed by the dispatcher
(HMAC-SHA256). ``Dispatcher.approve`` accepts only a request it signed and returns an ``Approval`` (signed under
a different domain, so a request can never pass for an approval) that expires ``approval_ttl`` seconds later.
A later ``run(turn, approvals=[...])`` runs a call only when an approval matches its conversation, turn, id,
name and arguments hash, has not expired and its signature verifies; running the call consumes it (through the
ledger, so across processes when the ledger is shared). A conversation resumed from history without a token,
a later turn's identical call, and a second use all get ``approval_required`` again.

Canonical arguments JSON: the argument object encoded with sorted keys and no whitespace (msgspec).
Both Structs encode with ``msgspec.json`` so an application can keep them between requests.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ..errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    pass

__all__ = [
    "Decision",
    "PolicyContext",
    "ApprovalRequest",
    "Approval",
    "canonical_arguments",
    "arguments_sha256",
]

Verdict = Literal["allow", "deny", "needs_approval"]
#: the three verdicts: anything else a policy answers denies
VERDICTS = ("allow", "deny", "needs_approval")


def valid_verdict(verdict: Any, reason: Any) -> bool:
    """True when ``verdict`` is exactly one of the three verdict strings (a ``str``, not a subclass, whose ``==``
    could say anything) and ``reason`` is a ``str``."""
    return type(verdict) is str and verdict in VERDICTS and type(reason) is str


class Decision(msgspec.Struct, frozen=True):
    """A policy's verdict for one call, with an optional reason (shown to the model for deny/approval).

    ``verdict`` is exactly ``"allow"``, ``"deny"`` or ``"needs_approval"`` and ``reason`` a ``str``: anything else
    (a typo such as ``"denied"``, ``False``) is a ``UsageError`` when the decision is built (a ``ValidationError``
    when decoded), so a policy that builds one fails, and a policy that fails denies. The dispatcher checks a
    decision again when it reads it."""

    verdict: Verdict
    reason: str = ""

    def __post_init__(self) -> None:
        if not valid_verdict(self.verdict, self.reason):
            if type(self.reason) is not str:
                raise UsageError(f"a Decision's reason must be a str, got {type(self.reason).__name__}")
            raise UsageError(f"a Decision's verdict must be one of {', '.join(VERDICTS)}; got "
                             f"{_shown(self.verdict)}")

    @classmethod
    def allow(cls, reason: str = "") -> "Decision":
        return cls("allow", reason)

    @classmethod
    def deny(cls, reason: str = "") -> "Decision":
        return cls("deny", reason)

    @classmethod
    def needs_approval(cls, reason: str = "") -> "Decision":
        return cls("needs_approval", reason)


class PolicyContext(msgspec.Struct, frozen=True, kw_only=True):
    """What a policy sees besides the call: the conversation, the declared tool and the whole turn."""

    conversation_id: str
    tool: Any  # Tool
    turn: Any  # Turn


def _shown(value: Any) -> str:
    """A short, safe description of a bad verdict (its ``repr`` may raise or be huge)."""
    try:
        text = repr(value) if isinstance(value, (str, bytes, int, float, bool, type(None))) else ""
    except Exception:  # noqa: BLE001
        text = ""
    text = text if len(text) <= 40 else text[:40] + "…"
    return f"{type(value).__name__} {text}".strip()


def canonical_arguments(args: Any) -> bytes:
    """The canonical JSON of an argument object: sorted keys, no whitespace, UTF-8."""
    return msgspec.json.encode(args, order="sorted")


def arguments_sha256(args: Any) -> str:
    """Hex sha256 of ``canonical_arguments(args)``."""
    return hashlib.sha256(canonical_arguments(args)).hexdigest()


class ApprovalRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A deferred call waiting for a person's decision, signed by the dispatcher that issued it.

    ``arguments`` is what the approver is shown; ``args_sha256`` binds it (``approve`` re-hashes it).
    ``local_id`` identifies the call only when the provider sent no ``call_id``.
    """

    conversation_id: str
    call_id: str | None
    local_id: str
    name: str
    args_sha256: str
    arguments: Any = None
    reason: str = ""
    #: the identity of the turn the call belongs to (see ``Dispatcher.run``'s ``turn_id``)
    turn_id: str = ""
    signature: str = ""


class Approval(msgspec.Struct, frozen=True, kw_only=True):
    """A verified approval of one call instance with exactly these arguments, signed by the dispatcher; valid
    until ``expires_at`` (seconds since the epoch) and for one use."""

    conversation_id: str
    call_id: str | None
    local_id: str
    name: str
    args_sha256: str
    approver: str
    issued_at: float
    turn_id: str = ""
    expires_at: float = 0.0
    signature: str = ""


_REQUEST_DOMAIN = "toolwire/approval-request/v2"
_APPROVAL_DOMAIN = "toolwire/approval/v2"


def _call_ref(call_id: str | None, local_id: str) -> list[Any]:
    # the provider's id identifies a call; the positional local id only when there is none
    return [call_id, None] if call_id else [None, local_id]


class Signer:
    """HMAC-SHA256 over a canonical encoding of the bound fields, one domain per token type."""

    __slots__ = ("_key",)

    def __init__(self, secret: bytes) -> None:
        if not isinstance(secret, (bytes, bytearray)) or len(secret) < 16:
            raise ValueError("approval secret must be at least 16 bytes")
        self._key = bytes(secret)

    def _mac(self, fields: list[Any]) -> str:
        return hmac.new(self._key, msgspec.json.encode(fields), hashlib.sha256).hexdigest()

    def request_mac(self, r: ApprovalRequest) -> str:
        return self._mac([_REQUEST_DOMAIN, r.conversation_id, r.turn_id, *_call_ref(r.call_id, r.local_id),
                          r.name, r.args_sha256])

    def approval_mac(self, a: Approval) -> str:
        return self._mac([_APPROVAL_DOMAIN, a.conversation_id, a.turn_id, *_call_ref(a.call_id, a.local_id),
                          a.name, a.args_sha256, a.approver, a.issued_at, a.expires_at])

    def request_valid(self, r: ApprovalRequest) -> bool:
        return isinstance(r, ApprovalRequest) and hmac.compare_digest(r.signature, self.request_mac(r))

    def approval_valid(self, a: Approval) -> bool:
        return isinstance(a, Approval) and hmac.compare_digest(a.signature, self.approval_mac(a))


def approval_targets(a: Approval, conversation_id: str, turn_id: str, call_id: str | None, local_id: str) -> bool:
    """True when ``a`` names this call of this turn of this conversation (its signature, arguments and expiry
    are checked apart)."""
    return (a.conversation_id == conversation_id and a.turn_id == turn_id
            and _call_ref(a.call_id, a.local_id) == _call_ref(call_id, local_id))
