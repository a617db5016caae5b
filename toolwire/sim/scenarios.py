"""The simulated model's scripts.

``SCENARIOS`` maps a scenario name to a ``Scenario``: the user prompt in each language (``en``, ``pt-BR``,
``es``), the localized answers, and the script. The model picks the scenario whose prompt equals the
conversation's first user text (surrounding white space ignored), answers in that prompt's language, and runs
the script over the tool rounds since the latest user text. Results are paired with their calls by id (by name
and order only for Gemini calls without ids), never by position. Whatever a script says, a model whose last two
results were errors, or that already made ``MAX_ROUNDS`` tool rounds, answers with text instead of calling again;
and when every result of its last round says the call never ran (``kind: not_run``, "truncated", …) it asks for
the same calls again before its script is consulted.

| scenario | first response | then |
|---|---|---|
| ``height`` | ``lookup_demo_value {"key":"height"}`` | "You are 170 cm tall." (the result's ``value``) |
| ``height_weight`` | two parallel ``lookup_demo_value`` calls | both values, each from its call's result (by id) |
| ``rice`` | ``search_foods {"query":"arroz"}`` | "Rice has 28 g of carbohydrates per 100 g." |
| ``misspelled_tool`` | ``search_foodz {"query":"arroz"}`` | on its error ``search_foods``, then as ``rice`` |
| ``missing_argument`` | ``save_measurement {"kind":"weight","unit":"kg"}`` | refused: "What is your weight in kg?" |
| ``catalogue_down`` | ``search_foods {"query":"feijão"}`` | on an error: it could not reach the food catalogue |
| ``save_with_faults`` | ``save_measurement {"kind":"weight","value":70,"unit":"kg"}`` | "Saved: 70 kg" |
| ``mcp_notes`` | ``add_note {"text": …}`` (a tool of the demo MCP server) | ``list_notes``, then the note |
| ``provider_down`` | a text answer (the demo plans a 503 for every attempt) | |

A prompt that matches no scenario gets a plain text answer without calls.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from ._core import Reply
from ._model import MAX_ROUNDS, ScriptContext, find_key, find_number, is_error

__all__ = ["Scenario", "SCENARIOS", "LANGUAGES", "find_scenario", "MAX_ROUNDS"]

LANGUAGES = ("en", "pt-BR", "es")


@dataclass(frozen=True)
class Scenario:
    """One scripted conversation: ``prompts`` per language, localized ``texts`` per key, and ``script``."""

    name: str
    prompts: dict[str, str]
    script: Callable[[ScriptContext], Reply]
    texts: dict[str, dict[str, str]] = field(default_factory=dict)
    tools: tuple[str, ...] = ()


# ---- result helpers ----------------------------------------------------------------------------------------


def _lookup_value(result: Any) -> str | None:
    if result is None:
        return None
    v = result.value
    if isinstance(v, dict) and v.get("found") is False:
        return None
    found = find_key(v, "value", lambda x: isinstance(x, (str, int, float)) and not isinstance(x, bool))
    return None if found is None else str(found)


def _carbs(result: Any) -> Any:
    return None if result is None else find_number(result.value, "carbohydrate")


# ---- scripts -------------------------------------------------------------------------------------------------


def _height(ctx: ScriptContext) -> Reply:
    last = ctx.last
    if last is None:
        return ctx.call("lookup_demo_value", key="height")
    _, res = last.pairs[0]
    if is_error(res):
        return ctx.say("error")
    value = _lookup_value(res)
    return ctx.say("answer", value=value) if value is not None else ctx.say("not_found")


def _height_weight(ctx: ScriptContext) -> Reply:
    values: dict[str, str] = {}
    failed = False
    for call, res in ctx.all_pairs():
        key = call.args.get("key") if isinstance(call.args, dict) else None
        if call.name != "lookup_demo_value" or key not in ("height", "weight"):
            continue
        if is_error(res):
            failed = True
            values.pop(key, None)
            continue
        value = _lookup_value(res)
        values[key] = value if value is not None else ""
    missing = [k for k in ("height", "weight") if k not in values]
    if missing:
        if failed and ctx.rounds:
            return ctx.say("error")
        return ctx.calls(*[("lookup_demo_value", {"key": k}) for k in missing])
    if not values["height"] or not values["weight"]:
        return ctx.say("not_found")
    return ctx.say("answer", height=values["height"], weight=values["weight"])


def _foods(query: str) -> Callable[[ScriptContext], Reply]:
    def script(ctx: ScriptContext) -> Reply:
        last = ctx.last
        if last is None:
            return ctx.call("search_foods", query=query)
        call, res = last.pairs[0]
        if is_error(res):
            return ctx.say("catalogue_error")
        carbs = _carbs(res)
        return ctx.say("answer", carbs=carbs) if carbs is not None else ctx.say("not_found")
    return script


def _misspelled(ctx: ScriptContext) -> Reply:
    last = ctx.last
    if last is None:
        return ctx.call("search_foodz", query="arroz")
    call, res = last.pairs[0]
    carbs = _carbs(res)
    if carbs is not None:
        return ctx.say("answer", carbs=carbs)
    if call.name != "search_foods":  # the misspelled call got no food back: call the right tool
        return ctx.call("search_foods", query="arroz")
    return ctx.say("catalogue_error") if is_error(res) else ctx.say("not_found")


_NUMBER = re.compile(r"(\d+(?:[.,]\d+)?)")


def _saved_value(res: Any) -> Any:
    if res is None or is_error(res):
        return None
    return find_key(res.value, "value", lambda x: isinstance(x, (int, float)) and not isinstance(x, bool))


def _missing_argument(ctx: ScriptContext) -> Reply:
    given = None
    if len(ctx.user_texts) > 1:  # the user answered the clarifying question
        m = _NUMBER.search(ctx.latest_user_text)
        if m:
            num = float(m.group(1).replace(",", "."))
            given = int(num) if num.is_integer() else num
    last = ctx.last
    if last is None:
        if given is not None:
            return ctx.call("save_measurement", kind="weight", value=given, unit="kg")
        return ctx.call("save_measurement", kind="weight", unit="kg")
    call, res = last.pairs[0]
    args = call.args if isinstance(call.args, dict) else {}
    saved = _saved_value(res)
    if saved is None and "value" not in args:  # the call without a value was refused: ask for it
        return ctx.say("ask_value")
    if saved is None and is_error(res):
        return ctx.say("error")
    return ctx.say("saved", value=saved if saved is not None else args.get("value", ""), unit=args.get("unit", "kg"))


def _save_with_faults(ctx: ScriptContext) -> Reply:
    last = ctx.last
    if last is None:
        return ctx.call("save_measurement", kind="weight", value=70, unit="kg")
    call, res = last.pairs[0]
    if is_error(res):
        return ctx.say("error")
    args = call.args if isinstance(call.args, dict) else {}
    saved = _saved_value(res)
    return ctx.say("saved", value=saved if saved is not None else args.get("value", 70), unit=args.get("unit", "kg"))


_NOTE = {"en": "Drank two glasses of water", "pt-BR": "Bebi dois copos de água", "es": "Bebí dos vasos de agua"}


def _notes(ctx: ScriptContext) -> Reply:
    """Add a note with the MCP server's ``add_note``, then read the notebook back with ``list_notes``."""
    note = _NOTE.get(ctx.lang, _NOTE["en"])
    last = ctx.last
    if last is None:
        return ctx.call("add_note", text=note)
    call, res = last.pairs[0]
    if is_error(res):
        return ctx.say("error")
    if call.name == "add_note":
        return ctx.call("list_notes")
    if note in json.dumps(res.value if res is not None else None, ensure_ascii=False):
        return ctx.say("answer", note=note)
    return ctx.say("error")


def _provider_down(ctx: ScriptContext) -> Reply:
    return ctx.say("answer")


# ---- the table -----------------------------------------------------------------------------------------------

_CATALOGUE_ERROR = {
    "en": "I couldn't reach the food catalogue, so I can't tell you that right now. Please try again later.",
    "pt-BR": "Não consegui acessar o catálogo de alimentos, então não posso responder agora. Tente novamente "
             "mais tarde.",
    "es": "No pude acceder al catálogo de alimentos, así que no puedo responder ahora. Inténtalo de nuevo más "
          "tarde.",
}
_RICE_TEXTS = {
    "answer": {
        "en": "Rice has {carbs} g of carbohydrates per 100 g.",
        "pt-BR": "O arroz tem {carbs} g de carboidratos por 100 g.",
        "es": "El arroz tiene {carbs} g de carbohidratos por 100 g.",
    },
    "not_found": {
        "en": "I couldn't find rice in the food catalogue.",
        "pt-BR": "Não encontrei arroz no catálogo de alimentos.",
        "es": "No encontré arroz en el catálogo de alimentos.",
    },
    "catalogue_error": _CATALOGUE_ERROR,
}
_SAVE_TEXTS = {
    "saved": {"en": "Saved: {value} {unit}", "pt-BR": "Salvo: {value} {unit}", "es": "Guardado: {value} {unit}"},
    "error": {
        "en": "I couldn't confirm that your weight was saved. Please check before trying again.",
        "pt-BR": "Não consegui confirmar que o seu peso foi salvo. Verifique antes de tentar novamente.",
        "es": "No pude confirmar que tu peso se guardó. Compruébalo antes de intentarlo de nuevo.",
    },
}

SCENARIOS: dict[str, Scenario] = {
    s.name: s for s in [
        Scenario(
            name="height",
            prompts={"en": "How tall am I?", "pt-BR": "Qual é a minha altura?", "es": "¿Cuánto mido?"},
            script=_height,
            tools=("lookup_demo_value",),
            texts={
                "answer": {"en": "You are {value} tall.", "pt-BR": "Você tem {value} de altura.",
                           "es": "Mides {value}."},
                "not_found": {"en": "I don't have your height stored.",
                              "pt-BR": "Não tenho a sua altura registrada.",
                              "es": "No tengo tu altura guardada."},
                "error": {"en": "I couldn't look up your height right now. Please try again later.",
                          "pt-BR": "Não consegui consultar a sua altura agora. Tente novamente mais tarde.",
                          "es": "No pude consultar tu altura ahora. Inténtalo de nuevo más tarde."},
            },
        ),
        Scenario(
            name="height_weight",
            prompts={"en": "How tall am I and how much do I weigh?",
                     "pt-BR": "Qual é a minha altura e quanto eu peso?",
                     "es": "¿Cuánto mido y cuánto peso?"},
            script=_height_weight,
            tools=("lookup_demo_value",),
            texts={
                "answer": {"en": "You are {height} tall and weigh {weight}.",
                           "pt-BR": "Você tem {height} de altura e pesa {weight}.",
                           "es": "Mides {height} y pesas {weight}."},
                "not_found": {"en": "I don't have your height and weight stored.",
                              "pt-BR": "Não tenho a sua altura e o seu peso registrados.",
                              "es": "No tengo tu altura y tu peso guardados."},
                "error": {"en": "I couldn't look up your height and weight right now. Please try again later.",
                          "pt-BR": "Não consegui consultar a sua altura e o seu peso agora. Tente novamente "
                                   "mais tarde.",
                          "es": "No pude consultar tu altura y tu peso ahora. Inténtalo de nuevo más tarde."},
            },
        ),
        Scenario(
            name="rice",
            prompts={"en": "How many carbohydrates does rice have?",
                     "pt-BR": "Quantos carboidratos tem o arroz?",
                     "es": "¿Cuántos carbohidratos tiene el arroz?"},
            script=_foods("arroz"),
            tools=("search_foods",),
            texts=_RICE_TEXTS,
        ),
        Scenario(
            name="misspelled_tool",
            prompts={"en": "How many carbs are in rice?",
                     "pt-BR": "Quantos carboidratos há no arroz?",
                     "es": "¿Cuántos carbohidratos hay en el arroz?"},
            script=_misspelled,
            tools=("search_foods",),
            texts=_RICE_TEXTS,
        ),
        Scenario(
            name="missing_argument",
            prompts={"en": "Save my weight.", "pt-BR": "Salve o meu peso.", "es": "Guarda mi peso."},
            script=_missing_argument,
            tools=("save_measurement",),
            texts={
                "ask_value": {"en": "What is your weight in kg?", "pt-BR": "Qual é o seu peso em kg?",
                              "es": "¿Cuál es tu peso en kg?"},
                **_SAVE_TEXTS,
            },
        ),
        Scenario(
            name="catalogue_down",
            prompts={"en": "How many carbohydrates do beans have?",
                     "pt-BR": "Quantos carboidratos tem o feijão?",
                     "es": "¿Cuántos carbohidratos tienen los frijoles?"},
            script=_foods("feijão"),
            tools=("search_foods",),
            texts={
                "answer": {"en": "Beans have {carbs} g of carbohydrates per 100 g.",
                           "pt-BR": "O feijão tem {carbs} g de carboidratos por 100 g.",
                           "es": "Los frijoles tienen {carbs} g de carbohidratos por 100 g."},
                "not_found": {"en": "I couldn't find beans in the food catalogue.",
                              "pt-BR": "Não encontrei feijão no catálogo de alimentos.",
                              "es": "No encontré frijoles en el catálogo de alimentos."},
                "catalogue_error": _CATALOGUE_ERROR,
            },
        ),
        Scenario(
            name="save_with_faults",
            prompts={"en": "Save my weight: 70 kg.", "pt-BR": "Salve o meu peso: 70 kg.",
                     "es": "Guarda mi peso: 70 kg."},
            script=_save_with_faults,
            tools=("save_measurement",),
            texts=dict(_SAVE_TEXTS),
        ),
        Scenario(
            name="mcp_notes",
            prompts={"en": "Note that I drank two glasses of water, then read me my notes.",
                     "pt-BR": "Anote que bebi dois copos de água e depois leia as minhas notas.",
                     "es": "Anota que bebí dos vasos de agua y luego léeme mis notas."},
            script=_notes,
            tools=("add_note", "list_notes"),
            texts={
                "answer": {"en": "Noted. Your notes: {note}.", "pt-BR": "Anotado. As suas notas: {note}.",
                           "es": "Anotado. Tus notas: {note}."},
                "error": {"en": "I couldn't reach your notebook right now. Please try again later.",
                          "pt-BR": "Não consegui acessar o seu caderno de notas agora. Tente novamente mais tarde.",
                          "es": "No pude acceder a tu libreta de notas ahora. Inténtalo de nuevo más tarde."},
            },
        ),
        Scenario(
            name="provider_down",
            prompts={"en": "What is the weather?", "pt-BR": "Como está o tempo?", "es": "¿Qué tiempo hace?"},
            script=_provider_down,
            texts={"answer": {"en": "I can't check the weather: I have no weather tool.",
                              "pt-BR": "Não consigo ver a previsão do tempo: não tenho uma ferramenta de clima.",
                              "es": "No puedo consultar el tiempo: no tengo una herramienta del clima."}},
        ),
    ]
}

_BY_PROMPT: dict[str, tuple[Scenario, str]] = {
    prompt.strip(): (s, lang) for s in SCENARIOS.values() for lang, prompt in s.prompts.items()
}
if len(_BY_PROMPT) != sum(len(s.prompts) for s in SCENARIOS.values()):  # pragma: no cover - table check
    raise RuntimeError("two scenarios share a prompt")


def find_scenario(first_user_text: str) -> tuple[Scenario, str] | None:
    """The scenario and language whose prompt equals ``first_user_text`` (white space at the ends ignored)."""
    if not isinstance(first_user_text, str):
        return None
    return _BY_PROMPT.get(first_user_text.strip())

