"""A tool result stored inside the assistant message that holds its call (an application appending the result to
the wrong message) was left there by ``repair_history`` for the dialects whose results are blocks of the next user
message: the real answer stayed where the provider refuses it and an error result ("no result was recorded") was
inserted in its place. The result now moves to the user message after its call; a provider's own server-side
result blocks in an assistant message stay where they are."""

from __future__ import annotations

import pytest

import toolwire

PAIRS = {
    "anthropic": (
        lambda cid: {"type": "tool_use", "id": cid, "name": "get_weather", "input": {"city": "Paris"}},
        lambda cid, text: {"type": "tool_result", "tool_use_id": cid, "content": text},
        lambda block: block.get("type") == "tool_result",
        lambda block: block.get("type") == "tool_use",
    ),
    "bedrock-converse": (
        lambda cid: {"toolUse": {"toolUseId": cid, "name": "get_weather", "input": {"city": "Paris"}}},
        lambda cid, text: {"toolResult": {"toolUseId": cid, "content": [{"text": text}], "status": "success"}},
        lambda block: "toolResult" in block,
        lambda block: "toolUse" in block,
    ),
}


@pytest.mark.parametrize("provider", sorted(PAIRS))
def test_a_result_inside_the_assistant_message_moves_to_the_next_user_message(provider):
    """The stored answer is kept and moved after its call; no error result replaces it."""
    call, result, is_result, _ = PAIRS[provider]
    history = [
        {"role": "user", "content": [{"text": "Weather in Paris?"}] if provider == "bedrock-converse"
         else "Weather in Paris?"},
        {"role": "assistant", "content": [call("c1"), result("c1", "21 C and clear")]},
    ]
    fixed, report = toolwire.repair_history(provider, history)
    assert [m["role"] for m in fixed] == ["user", "assistant", "user"]
    assert not any(is_result(b) for b in fixed[1]["content"])
    [answer] = [b for b in fixed[2]["content"] if is_result(b)]
    assert "21 C and clear" in repr(answer) and "no result was recorded" not in repr(answer)
    assert report.actions


def test_server_tool_results_in_an_assistant_message_stay_there():
    """A Bedrock server tool's toolUse and toolResult blocks are the provider's: repair leaves them in place."""
    server = [{"toolUse": {"toolUseId": "s1", "name": "nova_grounding", "input": {}, "type": "server_tool_use"}},
              {"toolResult": {"toolUseId": "s1", "content": [{"text": "found"}], "status": "success"}},
              {"text": "It is sunny."}]
    history = [{"role": "user", "content": [{"text": "Weather?"}]}, {"role": "assistant", "content": server}]
    fixed, _ = toolwire.repair_history("bedrock-converse", history)
    assert fixed == history
