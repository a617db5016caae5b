"""Rich results attacked the way a hostile user would (docs/failure-modes.md 50): an image whose bytes are of another
type than its ``mime_type`` says, or of no image type at all; an ``OutcomeUnknown`` whose reason cannot be
printed; a ``ToolError`` whose content cannot be read; a ``ToolResult`` built by hand with parts as dicts or raw
bytes; an argument validator raising ``ToolError`` or an exception that cannot be printed.

Before, a JPEG labelled ``image/png`` went to Anthropic as it was, which refuses it ("The image was specified using
the image/png media type, but the image appears to be a image/jpeg image") in every later request of the
conversation, so the user got only the fallback from then on; the write of an ``OutcomeUnknown(reason)`` whose
``str()`` raises made ``Dispatcher.run`` raise after its effect; a ``ToolError`` subclass whose ``content`` raises
did the same; ``encode_results`` / ``history_messages`` raised ``AttributeError`` or ``TypeError`` for dict parts
and bytes, which the dispatcher takes. A ``__post_init__`` raising ``ToolError(Content(...))`` told the model only
"the tool answered with an error", and one raising an exception whose ``str()`` raises made the dispatch raise."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
from contextlib import aclosing
from typing import Any

import msgspec
import pytest

import toolwire
from toolwire import (
    Content,
    Dispatcher,
    ImagePart,
    OutcomeUnknown,
    Registry,
    ResourcePart,
    ResultKind,
    SQLiteLedger,
    TextPart,
    Tool,
    ToolError,
    ToolResult,
)
from toolwire.harness import AsyncToolLoop, RetryPolicy, ToolLoop
from toolwire.sim import SimProvider

from ..bodies import PROVIDERS
from ..dialects import SIMULATED, adapter
from ..rich import JPEG, PDF, PNG, media_of, turn_of
from ..test_results_encoding import check_sdk

K = ResultKind
FAST = RetryPolicy(attempts=3, deadline=20.0, initial=0.01, max_backoff=0.05, max_hint=2.0)
#: a GIF and a lossless WebP of one pixel, each labelled with another type below (and the JPEG of tests/rich.py)
GIF = base64.b64encode(b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,"
                       b"\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;").decode()
WEBP = base64.b64encode(b"RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00/\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88"
                        b"\xfe\x07\x00").decode()
NOT_AN_IMAGE = base64.b64encode(b"this is a text file, not a picture").decode()
MODES = ["sync", "async", "stream"]


def lookup_with(content: Any):
    def lookup_demo_value(key: str) -> Any:
        """Look up one of the user's stored values: height or weight."""
        return content
    return Registry([Tool.from_function(lookup_demo_value, effect="read")])


def run_loop(provider: str, url: str, mode: str, registry: Registry) -> Any:
    kw = dict(model="m", registry=registry, base_url=url, api_key="sim-key", retry=FAST, timeout=10.0)
    if mode == "sync":
        with ToolLoop(provider, **kw) as loop:
            return loop.run("How tall am I?")

    async def main() -> Any:
        async with AsyncToolLoop(provider, **kw) as loop:
            if mode == "async":
                return await loop.run("How tall am I?")
            async with aclosing(loop.stream("How tall am I?")) as events:
                async for event in events:
                    pass
            return event.result

    return asyncio.run(main())


def sent_answers(sim: SimProvider, provider: str) -> list[Any]:
    """The tool answers of the request after the first, as encode_results gives them."""
    return adapter(provider).results_in(sim.requests[1].body)


# ==== media whose bytes disagree with their type ==================================================================
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", SIMULATED)  # the loop runs against the simulated provider
def test_a_jpeg_labelled_png_reaches_the_provider_as_a_jpeg(provider, mode):
    """A handler answers with JPEG bytes labelled image/png: the conversation goes on (the simulator refuses a
    mismatch where Anthropic does), and what is sent natively says image/jpeg."""
    sim = SimProvider(seed=7)
    with sim.serve() as url:
        result = run_loop(provider, url, mode, lookup_with(Content(parts=[
            TextPart(text="170 cm"), ImagePart(data=JPEG, mime_type="image/png")])))
        answers = sent_answers(sim, provider)
    assert not result.fallback, result.reason
    for message in answers:
        check_sdk(provider, message)
    assert media_of(provider, answers) == ([] if provider == "openai-chat" else [("image/jpeg", JPEG)])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", SIMULATED)  # the loop runs against the simulated provider
def test_bytes_of_no_image_type_are_described_not_sent_as_an_image(provider, mode):
    """Text bytes labelled image/png: no provider could decode them, so they are described in words in every
    dialect and the conversation goes on."""
    sim = SimProvider(seed=7)
    with sim.serve() as url:
        result = run_loop(provider, url, mode, lookup_with([TextPart(text="170 cm"),
                                                            ImagePart(data=NOT_AN_IMAGE, mime_type="image/png")]))
        answers = sent_answers(sim, provider)
    assert not result.fallback, result.reason
    for message in answers:
        check_sdk(provider, message)
    assert media_of(provider, answers) == []
    assert "[image: image/png, 34 bytes" in json.dumps(answers)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("data, declared, actual", [
    (JPEG, "image/png", "image/jpeg"), (PNG, "image/jpeg", "image/png"), (GIF, "image/webp", "image/gif"),
    (WEBP, "IMAGE/GIF", "image/webp"), (PNG, "image/svg+xml", "image/png")])
def test_an_image_part_takes_the_type_its_bytes_have(provider, data, declared, actual):
    """The dispatcher's result and every dialect's encoding use the type the bytes have, within the SDK types."""
    turn = turn_of(provider, ("lookup_demo_value", {"key": "height"}))
    [r] = Dispatcher(lookup_with(ImagePart(data=data, mime_type=declared))).run(turn, conversation_id="c")
    assert r.kind is K.OK and r.parts == [ImagePart(data=data, mime_type=actual)]
    encoded = toolwire.encode_results(turn, [r])
    for message in encoded:
        check_sdk(provider, message)
    native = media_of(provider, encoded)
    assert all(kind == actual for kind, _ in native)
    assert declared not in json.dumps(encoded) or declared == actual


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_pdf_resource_that_is_no_pdf_is_described(provider):
    """A blob resource labelled application/pdf whose bytes are text is described, never sent as a document; a
    real PDF still is, where the provider takes one."""
    turn = turn_of(provider, ("lookup_demo_value", {"key": "height"}), ("lookup_demo_value", {"key": "weight"}))
    fake = ResourcePart(uri="file:///fake.pdf", mime_type="application/pdf", blob=NOT_AN_IMAGE)
    real = ResourcePart(uri="file:///real.pdf", mime_type="application/pdf", blob=PDF)
    results = [ToolResult(call_id=c.call_id, local_id=c.local_id, name=c.name, content="", is_error=False,
                          kind=K.OK, parts=[part]) for c, part in zip(turn.calls, (fake, real))]
    encoded = toolwire.encode_results(turn, results)
    for message in encoded:
        check_sdk(provider, message)
    assert [data for _, data in media_of(provider, encoded)] == ([] if provider == "openai-chat" else [PDF])


# ==== handlers whose exceptions misbehave =======================================================================
class UnprintableReason:
    def __str__(self) -> str:
        raise RuntimeError("this reason cannot be printed")

    __repr__ = __str__


class UnreadableToolError(ToolError):
    @property  # type: ignore[override]
    def content(self) -> Any:
        raise RuntimeError("this content cannot be read")

    @content.setter
    def content(self, value: Any) -> None:
        pass

    def __str__(self) -> str:
        raise RuntimeError("nor printed")


def _dispatch(dispatcher: Dispatcher, turn: toolwire.Turn, mode: str) -> list[ToolResult]:
    if mode == "sync":
        return dispatcher.run(turn, conversation_id="c")
    return asyncio.run(dispatcher.arun(turn, conversation_id="c"))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_write_raising_outcome_unknown_with_an_unprintable_reason_is_outcome_unknown(mode, tmp_path):
    """The write is answered outcome_unknown (nothing raised after its effect), its ledger entry stays started,
    and dispatching it again runs nothing."""
    runs: list[str] = []

    def save(key: str) -> str:
        """Save."""
        runs.append(key)
        raise OutcomeUnknown(UnprintableReason())  # type: ignore[arg-type]

    dispatcher = Dispatcher(Registry([Tool.from_function(save, effect="write")]),
                            ledger=SQLiteLedger(str(tmp_path / "ledger.db")))
    turn = turn_of("anthropic", ("save", {"key": "a"}))
    [first] = _dispatch(dispatcher, turn, mode)
    [again] = _dispatch(dispatcher, turn, mode)
    assert first.kind is K.OUTCOME_UNKNOWN and again.kind is K.OUTCOME_UNKNOWN
    assert runs == ["a"]
    assert "may or may not have taken effect" in first.content


@pytest.mark.parametrize("effect", ["read", "write"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_tool_error_whose_content_cannot_be_read_is_answered_result_unusable(mode, effect):
    """A ToolError subclass whose content (and str) raise: the call is answered result_unusable, run once."""
    runs: list[str] = []

    def save(key: str) -> str:
        """Save."""
        runs.append(key)
        raise UnreadableToolError("x")

    dispatcher = Dispatcher(Registry([Tool.from_function(save, effect=effect)]), read_retries=2, backoff=0)
    [r] = _dispatch(dispatcher, turn_of("gemini", ("save", {"key": "a"})), mode)
    assert r.kind is K.RESULT_UNUSABLE and runs == ["a"]
    assert ("took effect" in r.content) is (effect == "write")


# ==== hand-built results ===========================================================================================
@pytest.mark.parametrize("provider", PROVIDERS)
def test_hand_built_parts_as_dicts_or_bytes_encode_as_the_typed_parts(provider):
    """A ToolResult built by hand with parts as dicts (as JSON storage gives them back) and an ImagePart holding
    raw bytes: encode_results and history_messages give what the typed, base64 parts give."""
    turn = turn_of(provider, ("lookup_demo_value", {"key": "height"}))
    [call] = turn.calls

    def result(parts: list[Any]) -> ToolResult:
        return ToolResult(call_id=call.call_id, local_id=call.local_id, name=call.name, content="170 cm",
                          is_error=False, kind=K.OK, parts=parts)

    typed = result([TextPart(text="170 cm"), ImagePart(data=PNG, mime_type="image/png")])
    loose = result([{"type": "text", "text": "170 cm"},
                    ImagePart(data=base64.b64decode(PNG), mime_type="image/png")])  # type: ignore[arg-type]
    assert toolwire.encode_results(turn, [loose]) == toolwire.encode_results(turn, [typed])
    assert toolwire.history_messages(turn, [loose]) == toolwire.history_messages(turn, [typed])


# ==== argument validators =========================================================================================
class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("this exception cannot be printed")


class Place(msgspec.Struct):
    name: str

    def __post_init__(self) -> None:
        if self.name == "Atlantis":
            raise ToolError(Content(parts=[TextPart(text="Atlantis is no place with weather.")]))
        if self.name == "Nowhere":
            raise Unprintable()


@dataclasses.dataclass
class Town:
    name: str

    def __post_init__(self) -> None:
        if self.name == "Atlantis":
            raise ToolError([TextPart(text="Atlantis is no town with weather.")])
        if self.name == "Nowhere":
            raise Unprintable()


def forecast(place: Place) -> str:
    """The forecast of a place."""
    return "sunny"


def town_forecast(town: Town) -> str:
    """The forecast of a town."""
    return "sunny"


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("fn, field", [(forecast, "place"), (town_forecast, "town")])
def test_an_argument_validator_raising_tool_error_or_an_unprintable_exception_is_invalid_arguments(fn, field, mode):
    """A Struct's or dataclass's __post_init__ raising ToolError(Content or parts): invalid_arguments telling the
    model the content's text; one raising an exception whose str() raises: invalid_arguments naming its type.
    Nothing runs, the dispatch never raises."""
    dispatcher = Dispatcher(Registry([Tool.from_function(fn, effect="write")]))
    turn = turn_of("anthropic", (fn.__name__, {field: {"name": "Atlantis"}}),
                   (fn.__name__, {field: {"name": "Nowhere"}}))
    atlantis, nowhere = _dispatch(dispatcher, turn, mode)
    assert atlantis.kind is K.INVALID_ARGUMENTS and nowhere.kind is K.INVALID_ARGUMENTS
    assert "Atlantis is no" in atlantis.content and "with weather." in atlantis.content
    assert "Unprintable" in nowhere.content
