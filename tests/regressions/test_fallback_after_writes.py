"""A run whose provider fails (or whose steps run out) after one of its writes took effect: the fallback says the
action was done, or may have been, in every language, and never asks to try again; ``LoopResult.writes`` lists
the writes that ran. End to end over loopback HTTP against the simulated provider, every dialect, sync and async.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import toolwire.harness as harness
from toolwire import OutcomeUnknown
from toolwire.harness import LOCALES, AsyncToolLoop, FallbackReason, LoopResult, RetryPolicy, ToolLoop, fallback_message
from toolwire.harness.demo_tools import DemoWorld
from toolwire.sim import SCENARIOS, Fault, SimProvider

from ..dialects import SIMULATED as PROVIDERS

FAST = RetryPolicy(attempts=3, deadline=30.0, initial=0.01, max_backoff=0.05, max_hint=1.0)
MODES = ["sync", "async"]
SAVE = SCENARIOS["save_with_faults"].prompts
HEIGHT = SCENARIOS["height"].prompts
#: what each language's plain fallbacks ask; after a write it would invite doing the action twice
TRY_AGAIN = {"en": "try again", "pt-BR": "tente novamente", "es": "inténtalo de nuevo"}


@pytest.fixture
def sim():
    provider = SimProvider(seed=3)
    with provider.serve():
        yield provider


def run(sim: SimProvider, provider: str, mode: str, prompt: str, *, world: DemoWorld, locale: str = "en",
        max_steps: int = 8, after_effect: Any = None) -> LoopResult:
    kw: dict[str, Any] = dict(model="sim-model", registry=world.registry(timeout=5.0, after_effect=after_effect),
                              base_url=sim.base_url, api_key="sk-test-0000", retry=FAST, locale=locale,
                              timeout=5.0, max_steps=max_steps, conversation_id=f"{provider}-{mode}")
    if mode == "sync":
        with ToolLoop(provider, **kw) as loop:
            return loop.run(prompt)

    async def go() -> LoopResult:
        async with AsyncToolLoop(provider, **kw) as loop:
            return await loop.run(prompt)

    return asyncio.run(go())


def _unsure() -> None:
    raise OutcomeUnknown("the connection dropped after the request was sent")


def assert_says_done(result: LoopResult, reason: FallbackReason, outcome: Any, locale: str = "en") -> None:
    assert result.fallback and result.reason is reason, (result.reason, result.answer)
    assert result.answer != fallback_message(reason, locale)
    assert TRY_AGAIN[locale] not in result.answer.lower()
    assert result.answer == fallback_message(reason, locale, writes=outcome)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_provider_failing_after_a_write_says_the_write_was_done(sim, provider, mode):
    """The write ran, then every request answers 500: the user reads that the action was done, and
    ``writes`` names the call that ran."""
    world = DemoWorld()
    sim.plan([Fault.ok()], then=Fault.status(500))
    result = run(sim, provider, mode, SAVE["en"], world=world)
    assert world.effects.count("save_measurement") == 1
    assert_says_done(result, FallbackReason.PROVIDER_FAILED, harness.WriteOutcome.OK)
    [call] = result.calls
    assert result.writes == (harness.WriteRecord(name="save_measurement", call_id=call.call_id,
                                                 outcome=harness.WriteOutcome.OK, result_kind="ok", step=0),)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_provider_failing_after_a_write_of_unknown_outcome_says_it_may_have_been_done(sim, provider, mode):
    """The write's handler cannot tell whether its effect happened (``outcome_unknown``), then the provider
    fails: the user reads that the action may have been done."""
    world = DemoWorld()
    sim.plan([Fault.ok()], then=Fault.status(500))
    result = run(sim, provider, mode, SAVE["en"], world=world, after_effect=_unsure)
    assert world.effects.count("save_measurement") == 1
    assert_says_done(result, FallbackReason.PROVIDER_FAILED, harness.WriteOutcome.OUTCOME_UNKNOWN)
    assert [(w.name, w.outcome, w.result_kind) for w in result.writes] == [
        ("save_measurement", harness.WriteOutcome.OUTCOME_UNKNOWN, "outcome_unknown")]


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_the_fallback_after_a_write_is_localized(sim, provider, locale):
    """Each language's fallback after a write says the action was done, in that language."""
    world = DemoWorld()
    sim.plan([Fault.ok()], then=Fault.status(500))
    result = run(sim, provider, "sync", SAVE[locale], world=world, locale=locale)
    assert world.effects.count("save_measurement") == 1
    assert_says_done(result, FallbackReason.PROVIDER_FAILED, harness.WriteOutcome.OK, locale)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_running_out_of_steps_after_a_write_says_the_write_was_done(sim, provider, mode):
    """One step: the write runs and no step is left for the answer. The step-limit fallback must not ask for
    the request again either."""
    world = DemoWorld()
    result = run(sim, provider, mode, SAVE["en"], world=world, max_steps=1)
    assert world.effects.count("save_measurement") == 1
    assert_says_done(result, FallbackReason.STEP_LIMIT, harness.WriteOutcome.OK)
    assert [w.name for w in result.writes] == ["save_measurement"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_answered_run_lists_its_writes_and_a_read_only_run_none(sim, provider, mode):
    """The model answers after the write: ``writes`` still lists it. A run of reads lists none, and its
    fallback stays the plain one."""
    world = DemoWorld()
    saved = run(sim, provider, mode, SAVE["en"], world=world)
    assert not saved.fallback
    assert [(w.name, w.outcome) for w in saved.writes] == [("save_measurement", harness.WriteOutcome.OK)]
    sim.plan([Fault.ok()], then=Fault.status(500))
    read = run(sim, provider, mode, HEIGHT["en"], world=DemoWorld())
    assert read.writes == ()
    assert read.fallback and read.answer == fallback_message(FallbackReason.PROVIDER_FAILED)


@pytest.mark.parametrize("locale", LOCALES)
def test_every_language_has_both_texts_after_writes_for_every_reason(locale):
    """Every reason, after writes that ran or may have run: a text of its own, never asking to try again."""
    for reason in FallbackReason:
        plain = fallback_message(reason, locale)
        done = fallback_message(reason, locale, writes=harness.WriteOutcome.OK)
        maybe = fallback_message(reason, locale, writes=harness.WriteOutcome.OUTCOME_UNKNOWN)
        assert len({plain, done, maybe}) == 3
        assert TRY_AGAIN[locale] not in done.lower() and TRY_AGAIN[locale] not in maybe.lower()
        assert fallback_message(reason, locale, writes=None) == plain


def _fails() -> None:
    raise RuntimeError("the storage raised half-way")


def _refuses() -> None:
    from toolwire import ToolError
    raise ToolError("the storage refused the write")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(("after_effect", "kind"), [(_fails, "outcome_unknown"), (_refuses, "tool_error")])
def test_a_write_whose_handler_raised_is_listed_as_may_have_run(sim, provider, mode, after_effect, kind):
    """The write's handler started and raised (``outcome_unknown``, or a ``ToolError`` of its own), then the
    provider fails: the fallback says the action may have been done, and ``writes`` says the same thing, so
    what the user reads and what the application reads never disagree."""
    world = DemoWorld()
    sim.plan([Fault.ok()], then=Fault.status(500))
    result = run(sim, provider, mode, SAVE["en"], world=world, after_effect=after_effect)
    assert world.effects.count("save_measurement") == 1
    assert_says_done(result, FallbackReason.PROVIDER_FAILED, harness.WriteOutcome.OUTCOME_UNKNOWN)
    assert [(w.name, w.outcome, w.result_kind) for w in result.writes] == [
        ("save_measurement", harness.WriteOutcome.OUTCOME_UNKNOWN, kind)]
