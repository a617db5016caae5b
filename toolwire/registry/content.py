"""What a handler may return beyond plain JSON, and the two ways it may answer other than returning.

A handler normally returns a string or any JSON-able value. It may instead return ``Content``: ordered parts
(text, images, audio, embedded resources, resource links) with optional structured JSON beside them, the shape of
an MCP ``tools/call`` result. Each dialect sends the parts its provider accepts in a tool result natively and
describes the others in text (see the README, "Rich results").

A handler may also raise:

* ``ToolError(content)``: the tool ran and its answer is an error, which the model reads (an MCP result with
  ``isError: true``). The call is answered ``tool_error`` with that content under the call's own id; it is never
  retried, and for a write the ledger records it as the call's completed outcome.
* ``OutcomeUnknown(reason)``: the handler cannot tell whether its effect happened (the server it forwarded the
  call to went away mid-call). A write is answered ``outcome_unknown`` and its ledger row stays ``started``, so
  it is never run again automatically; a read is answered ``handler_failed``.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec

from ..errors import ToolwireError

__all__ = [
    "HandlerNotStarted",
    "TextPart",
    "ImagePart",
    "AudioPart",
    "ResourcePart",
    "LinkPart",
    "Part",
    "Content",
    "ToolError",
    "OutcomeUnknown",
]


class TextPart(msgspec.Struct, frozen=True, tag="text", tag_field="type"):
    """Text for the model."""

    text: str


class ImagePart(msgspec.Struct, frozen=True, tag="image", tag_field="type"):
    """An image: ``data`` is base64 (standard alphabet, padded), ``mime_type`` such as ``image/png``."""

    data: str
    mime_type: str


class AudioPart(msgspec.Struct, frozen=True, tag="audio", tag_field="type"):
    """Audio: ``data`` is base64, ``mime_type`` such as ``audio/wav``."""

    data: str
    mime_type: str


class ResourcePart(msgspec.Struct, frozen=True, tag="resource", tag_field="type"):
    """An embedded resource: its ``uri`` and either ``text`` or ``blob`` (base64)."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


class LinkPart(msgspec.Struct, frozen=True, tag="resource_link", tag_field="type"):
    """A link to a resource the model may ask for; nothing is fetched."""

    uri: str
    name: str | None = None
    description: str | None = None
    mime_type: str | None = None


Part = Union[TextPart, ImagePart, AudioPart, ResourcePart, LinkPart]


class Content(msgspec.Struct, frozen=True):
    """A handler's rich answer: ``parts`` in order, and ``structured`` JSON (an object) when the tool gives one."""

    parts: list[Part] = msgspec.field(default_factory=list)
    structured: dict[str, Any] | None = None


class ToolError(ToolwireError):
    """Raised by a handler: the tool ran and answers with an error the model should read.

    ``content`` is a string, a JSON-able value or a ``Content``. The call is answered ``tool_error`` under its
    own id; it is not retried."""

    def __init__(self, content: Any) -> None:
        super().__init__(content if isinstance(content, str) else "the tool answered with an error")
        self.content = content


class HandlerNotStarted(ToolwireError):
    """Raised by a handler that certifies it did nothing: it checked before acting and never began (as the MCP
    client does when no session could be opened, so nothing was sent).

    The call is answered ``handler_failed``. Any other exception a write's handler raises (but ``ToolError``, its
    own answer) may have come after its effect, so that write is answered ``outcome_unknown``."""


class OutcomeUnknown(ToolwireError):
    """Raised by a handler that cannot tell whether its effect happened (its connection broke mid-call).

    A write is answered ``outcome_unknown`` and never run again automatically; a read, ``handler_failed``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
