"""The scripted model: finds the scenario from the conversation's first user text and runs its script over the
tool calls and results since the latest user text (each result paired with its call by id)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from ._core import Call, Conversation, Reply, Result

__all__ = ["Round", "ScriptContext", "respond", "is_error", "not_run", "find_key", "find_number", "fmt_number",
           "MAX_ROUNDS"]

#: after this many tool rounds since the latest user text the model answers with text, whatever the script says
MAX_ROUNDS = 6

_ERROR_KINDS = {"unknown_tool", "invalid_arguments", "denied", "approval_required", "handler_failed",
                "handler_timeout", "outcome_unknown", "not_run", "tool_error"}
_ERROR_TEXT = re.compile(r"\b(error|erro|unavailable|indispon[ií]vel|could not|couldn't|cannot|failed|failure|"
                         r"unknown tool|no tool|not found in|invalid|exception|timed? ?out|denied|not run|"
                         r"truncated)\b", re.IGNORECASE)
_NOT_RUN_TEXT = re.compile(r"\b(not run|never ran|was not executed|truncated|was cut)\b", re.IGNORECASE)
#: an ``outcome_unknown`` answer ("may or may not have taken effect ... not run again"): the call did run, so a
#: model does not simply ask for it again
_MAYBE_RAN_TEXT = re.compile(r"\bmay or may not have taken effect\b", re.IGNORECASE)


def is_error(result: Result | None) -> bool:
    """True when the result reports a failure: the dialect's flag, an ``error`` member, an error ``kind`` or
    ``status``, or a plain text that reads like an error message."""
    if result is None:
        return True
    if result.is_error is not None:
        return bool(result.is_error)
    v = result.value
    if isinstance(v, dict):
        if v.get("error") or v.get("is_error") is True or v.get("ok") is False or v.get("success") is False:
            return True
        return v.get("kind") in _ERROR_KINDS or v.get("status") in ("error", "failed")
    if isinstance(v, str):
        return bool(_ERROR_TEXT.search(v))
    return False


def not_run(result: Result | None) -> bool:
    """True when the result says the call never ran (its turn was cut): the model may simply ask again."""
    if result is None or not is_error(result):
        return False
    v = result.value
    if isinstance(v, dict):
        if v.get("kind") == "not_run":
            return True
        v = " ".join(str(x) for x in v.values())
    return isinstance(v, str) and bool(_NOT_RUN_TEXT.search(v)) and not _MAYBE_RAN_TEXT.search(v)


def find_key(value: Any, key: str, predicate: Callable[[Any], bool] = lambda v: True) -> Any:
    """The first value stored under ``key`` (depth first) that satisfies ``predicate``, or None."""
    if isinstance(value, dict):
        if key in value and predicate(value[key]):
            return value[key]
        for v in value.values():
            found = find_key(v, key, predicate)
            if found is not None:
                return found
    elif isinstance(value, list):
        for v in value:
            found = find_key(v, key, predicate)
            if found is not None:
                return found
    return None


def find_number(value: Any, fragment: str) -> float | int | None:
    """The first number stored under a key containing ``fragment`` (depth first), or None."""
    if isinstance(value, dict):
        for k, v in value.items():
            if fragment in str(k) and isinstance(v, (int, float)) and not isinstance(v, bool):
                return v
        for v in value.values():
            found = find_number(v, fragment)
            if found is not None:
                return found
    elif isinstance(value, list):
        for v in value:
            found = find_number(v, fragment)
            if found is not None:
                return found
    return None


def fmt_number(x: Any) -> str:
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)


def parse_content(text: str) -> Any:
    """A result's text as JSON when it is JSON, or when its first paragraph is a JSON object (a rich result's
    structured JSON before the words for its other parts), else the text."""
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        pass
    if isinstance(text, str) and text.startswith("{") and "\n\n" in text:
        try:
            first = json.loads(text.split("\n\n", 1)[0])
        except ValueError:
            return text
        if isinstance(first, dict):
            return first
    return text


@dataclass
class Round:
    """One model turn with calls and the results the application sent for them (paired by id)."""

    calls: list[Call]
    results: list[Result | None]

    @property
    def pairs(self) -> list[tuple[Call, Result | None]]:
        return list(zip(self.calls, self.results))

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.calls]


def _pair(calls: list[Call], results: list[Result]) -> list[Result | None]:
    """Results in the order of their calls: by id when the calls have ids, else by name and order."""
    out: list[Result | None] = []
    by_id = {r.call_id: r for r in results if r.call_id}
    used: set[int] = set()
    for c in calls:
        if c.id:
            out.append(by_id.get(c.id))
            continue
        match = None
        for k, r in enumerate(results):
            if k not in used and (r.name == c.name or r.name is None):
                used.add(k)
                match = r
                break
        out.append(match)
    return out


@dataclass
class ScriptContext:
    """What a scenario script sees: the language of the prompt, the user texts, and the tool rounds since the
    latest user text."""

    scenario: Any
    lang: str
    user_texts: list[str]
    rounds: list[Round]
    parallel: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def last(self) -> Round | None:
        return self.rounds[-1] if self.rounds else None

    @property
    def latest_user_text(self) -> str:
        return self.user_texts[-1] if self.user_texts else ""

    def say(self, key: str, **values: Any) -> Reply:
        texts = self.scenario.texts[key]
        text = texts.get(self.lang) or texts["en"]
        return Reply(text=text.format(**{k: fmt_number(v) for k, v in values.items()}))

    def call(self, name: str, **args: Any) -> Reply:
        return Reply(calls=[(name, dict(args))])

    def calls(self, *calls: tuple[str, dict[str, Any]]) -> Reply:
        return Reply(calls=[(n, dict(a)) for n, a in calls])

    def all_pairs(self) -> list[tuple[Call, Result | None]]:
        return [p for r in self.rounds for p in r.pairs]


GENERIC_TEXTS = {
    "no_script": {
        "en": "I am a simulated model and have no script for that question.",
        "pt-BR": "Sou um modelo simulado e não tenho roteiro para essa pergunta.",
        "es": "Soy un modelo simulado y no tengo guion para esa pregunta.",
    },
    "gave_up": {
        "en": "Sorry, the tool I need kept failing, so I can't answer that right now.",
        "pt-BR": "Desculpe, a ferramenta de que preciso continuou falhando, então não consigo responder agora.",
        "es": "Lo siento, la herramienta que necesito siguió fallando, así que no puedo responder ahora.",
    },
}


def _rounds(conv: Conversation) -> tuple[list[str], list[Round]]:
    users: list[str] = []
    rounds: list[Round] = []
    pending: list[Call] | None = None
    for kind, value in conv.entries:
        if kind == "user":
            users.append(value)
            rounds = []
            pending = None
        elif kind == "calls":
            pending = list(value)
            rounds.append(Round(pending, [None] * len(pending)))
        elif kind == "results" and pending is not None:
            rounds[-1].results = _pair(pending, list(value))
            pending = None
    return users, rounds


def respond(conv: Conversation) -> Reply:
    """The model's next message for ``conv``."""
    from .scenarios import find_scenario

    all_users = [v for k, v in conv.entries if k == "user"]
    users, rounds = _rounds(conv)
    found = find_scenario(all_users[0]) if all_users else None
    if found is None:
        return Reply(text=GENERIC_TEXTS["no_script"]["en"])
    scenario, lang = found
    ctx = ScriptContext(scenario=scenario, lang=lang, user_texts=all_users, rounds=rounds, parallel=conv.parallel)
    last = ctx.last
    if last is not None and last.results and all(not_run(r) for r in last.results):
        # the calls of a cut turn never ran: ask for them again (the error guard below still applies)
        reply = Reply(calls=[(c.name, dict(c.args) if isinstance(c.args, dict) else {}) for c in last.calls])
    else:
        reply = scenario.script(ctx)
    if reply.calls:
        trailing = 0
        for _, res in reversed(ctx.all_pairs()):
            if not is_error(res):
                break
            trailing += 1
        if trailing >= 2 or len(rounds) >= MAX_ROUNDS:
            texts = scenario.texts.get("gave_up") or GENERIC_TEXTS["gave_up"]
            return Reply(text=texts.get(lang) or texts["en"])
        if not conv.parallel and len(reply.calls) > 1:
            reply = Reply(calls=reply.calls[:1])
    return reply
