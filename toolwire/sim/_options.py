"""The request options the simulator checks as the providers do: sampling temperature, reasoning effort, parallel
calls, tool choice without tools, and Anthropic's extended-thinking rules. Each dialect's ``read`` calls its checker;
a refused request gets the provider's own 400 (``ApiError``)."""

from __future__ import annotations

from typing import Any

from ._core import ApiError

__all__ = ["check_chat", "check_responses", "check_anthropic", "check_gemini", "check_interactions"]

_OPENAI_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
_ANTHROPIC_EFFORTS = ("low", "medium", "high", "xhigh", "max")
_GEMINI_LEVELS = ("minimal", "low", "medium", "high", "xhigh")
_THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _listed(values: tuple[str, ...]) -> str:
    quoted = [f"'{v}'" for v in values]
    return ", ".join(quoted[:-1]) + f", and {quoted[-1]}"


def _openai_temperature(body: dict[str, Any]) -> None:
    if "temperature" not in body or body["temperature"] is None:
        return
    t = body["temperature"]
    if not _number(t):
        raise ApiError(400, f"Invalid type for 'temperature': expected a decimal, but got {type(t).__name__} instead.",
                       param="temperature", code="invalid_type")
    if t > 2:
        raise ApiError(400, f"Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got {t} "
                            "instead.", param="temperature", code="decimal_above_max_value")
    if t < 0:
        raise ApiError(400, f"Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got {t} "
                            "instead.", param="temperature", code="decimal_below_min_value")


def _openai_effort(value: Any, param: str) -> None:
    if value is not None and value not in _OPENAI_EFFORTS:
        raise ApiError(400, f"Invalid value: '{value}'. Supported values are: {_listed(_OPENAI_EFFORTS)}.",
                       param=param, code="invalid_value")


def _openai_tools_needed(body: dict[str, Any]) -> None:
    if body.get("tools"):
        return
    for field in ("tool_choice", "parallel_tool_calls"):
        if body.get(field) is not None:
            raise ApiError(400, f"Invalid value for '{field}': '{field}' is only allowed when 'tools' are "
                                "specified.", param=field)


def _openai_parallel(body: dict[str, Any]) -> None:
    value = body.get("parallel_tool_calls")
    if value is not None and not isinstance(value, bool):
        raise ApiError(400, "Invalid type for 'parallel_tool_calls': expected a boolean, but got "
                            f"{type(value).__name__} instead.", param="parallel_tool_calls", code="invalid_type")


def check_chat(body: dict[str, Any]) -> None:
    _openai_temperature(body)
    _openai_effort(body.get("reasoning_effort"), "reasoning_effort")
    _openai_parallel(body)
    _openai_tools_needed(body)


def check_responses(body: dict[str, Any]) -> None:
    _openai_temperature(body)
    reasoning = body.get("reasoning")
    if reasoning is not None:
        if not isinstance(reasoning, dict):
            raise ApiError(400, "Invalid type for 'reasoning': expected an object, but got "
                                f"{type(reasoning).__name__} instead.", param="reasoning", code="invalid_type")
        _openai_effort(reasoning.get("effort"), "reasoning.effort")
    _openai_parallel(body)


def check_anthropic(body: dict[str, Any]) -> None:
    t = body.get("temperature")
    if t is not None:
        if not _number(t):
            raise ApiError(400, "temperature: Input should be a valid number")
        if not 0 <= t <= 1:
            raise ApiError(400, "temperature: Input should be " + ("less than or equal to 1" if t > 1
                                                                   else "greater than or equal to 0"))
    output = body.get("output_config")
    if output is not None:
        if not isinstance(output, dict):
            raise ApiError(400, "output_config: Input should be a valid dictionary")
        effort = output.get("effort")
        if effort is not None and effort not in _ANTHROPIC_EFFORTS:
            raise ApiError(400, "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'")
    thinking = body.get("thinking")
    if thinking is None:
        return
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind not in ("enabled", "disabled", "adaptive", "between_tools"):
        raise ApiError(400, "thinking: Input tag does not match any of the expected tags: 'enabled', 'disabled', "
                            "'adaptive', 'between_tools'")
    if kind == "disabled":
        return
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or isinstance(budget, bool):
            raise ApiError(400, "thinking.enabled.budget_tokens: Field required" if budget is None
                           else "thinking.enabled.budget_tokens: Input should be a valid integer")
        if budget < 1024:
            raise ApiError(400, "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, int) and max_tokens <= budget:
            raise ApiError(400, "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
                                f"documentation at {_THINKING_DOCS}#max-tokens-and-context-window-size")
    if t is not None and t != 1:
        raise ApiError(400, "`temperature` may only be set to 1 when thinking is enabled. Please consult our "
                            f"documentation at {_THINKING_DOCS}#important-considerations-when-using-extended-thinking")
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        raise ApiError(400, "Thinking may not be enabled when tool_choice forces tool use.")


def _gemini_temperature(config: dict[str, Any], where: str) -> None:
    t = config.get("temperature")
    if t is None:
        return
    if not _number(t):
        raise ApiError(400, f"Invalid value at '{where}.temperature' (TYPE_FLOAT), {t!r}")
    if not 0 <= t <= 2:
        raise ApiError(400, f"* GenerateContentRequest.{where}.temperature: temperature must be in the range "
                            "[0.0, 2.0]\n")


def check_gemini(body: dict[str, Any]) -> None:
    config = body.get("generationConfig", body.get("generation_config"))
    if config is None:
        return
    if not isinstance(config, dict):
        raise ApiError(400, "Invalid JSON payload received. Unknown name \"generationConfig\": Proto field is not "
                            "repeating, cannot start list.")
    _gemini_temperature(config, "generation_config")
    thinking = config.get("thinkingConfig", config.get("thinking_config"))
    if not isinstance(thinking, dict):
        return
    level = thinking.get("thinkingLevel", thinking.get("thinking_level"))
    if level is not None and (not isinstance(level, str) or level.lower() not in _GEMINI_LEVELS):
        raise ApiError(400, "Invalid value at 'generation_config.thinking_config.thinking_level' "
                            "(type.googleapis.com/google.ai.generativelanguage.v1beta.ThinkingConfig.ThinkingLevel), "
                            f"\"{level}\"")
    if level is not None and thinking.get("thinkingBudget", thinking.get("thinking_budget")) is not None:
        raise ApiError(400, "You can only set only one of thinking budget and thinking level.")


def check_interactions(body: dict[str, Any]) -> None:
    config = body.get("generation_config")
    if config is None:
        return
    if not isinstance(config, dict):
        raise ApiError(400, "Invalid value at 'generation_config': expected an object.")
    _gemini_temperature(config, "generation_config")
    level = config.get("thinking_level")
    if level is not None and level not in _GEMINI_LEVELS:
        raise ApiError(400, f"Invalid value at 'generation_config.thinking_level', \"{level}\": expected one of "
                            f"{', '.join(_GEMINI_LEVELS)}.")
