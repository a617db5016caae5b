"""Checking a custom tool's text against its declared grammar ``format``, as the provider's constraint would have.

A Responses custom tool may declare ``{"type": "grammar", "syntax": "regex" | "lark", "definition": ...}``. OpenAI
applies it while sampling with LLGuidance: the whole text must match the regex (Rust ``regex`` crate syntax) or
derive from the grammar's ``start`` rule (LLGuidance's variant of Lark: ``%import common``, ``%ignore``,
``expr{m,n}``, regex terminals in Rust syntax). A server that ignores the constraint (an OpenAI-compatible
endpoint, a proxy, a replay) can send anything, so the dispatcher checks the text before the handler runs.

The check uses the same engine, the ``llguidance`` package (the ``grammar`` extra: ``pip install
'toolwire[grammar]'``), fed the text's UTF-8 bytes through a one-token-per-byte vocabulary. That gives:

* the provider's syntax and semantics: a definition OpenAI would refuse (a look-around, a back-reference, a Lark
  rule that is never defined) is refused when the tool is declared, not when a request fails; ``\\d``, ``\\w`` and
  ``.`` mean what they mean to the provider (Python's ``re`` and Lark differ on each);
* bounded work: regexes are matched by derivatives, without backtracking, so no pattern (``(a+)+b``) makes a
  hostile text take exponential time; the Earley parser's work per byte is bounded by LLGuidance's parser limits
  (at most 2,000 items a row), a text longer than ``FORMAT_CHECK_MAX_CHARS`` is refused without being checked,
  and a check still running after ``FORMAT_CHECK_SECONDS`` (only a highly ambiguous grammar gets there) is
  refused too. A regex or an unambiguous grammar checks 100,000 characters in about 0.2 s.

A tool declared with ``check_format=False`` skips all of this: the format is still declared to the provider and
the handler receives whatever text arrives.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from typing import Any

from .errors import ToolDeclarationError

__all__ = ["FORMAT_CHECK_MAX_CHARS", "FORMAT_CHECK_SECONDS", "FormatCheck", "format_check"]

#: The longest custom tool text checked against a grammar format; a longer one is answered ``invalid_arguments``
#: (nothing runs). About 0.2 s of checking for a regex, more for a grammar with many ambiguous rules.
FORMAT_CHECK_MAX_CHARS = 100_000
#: The longest a check may take: a text still being parsed then (an ambiguous grammar: Earley parsing is cubic in
#: the worst case) is answered ``invalid_arguments``. Checked between pieces of the text, so it can be passed by
#: about one parser step (under a second with LLGuidance's default row limit).
FORMAT_CHECK_SECONDS = 2.0
_FIRST_PIECE, _LARGEST_PIECE = 64, 8192
_FAST_PIECE_SECONDS, _SLOW_PIECE_SECONDS = 0.001, 0.01

_EXTRA_HINT = ("pip install 'toolwire[grammar]' (the llguidance package, the engine that applies these formats "
               "for the provider), or declare the tool with check_format=False to run its handler on any text")
_BYTE_TOKENS = 256  # token i is the byte i; token 256 ends the text
_MAX_QUOTED = 300


class _ByteVocabulary:
    """A vocabulary of one token per byte, so that any text is fed to the matcher byte by byte."""

    eos_token_id = _BYTE_TOKENS
    bos_token_id = None
    tokens = [bytes([i]) for i in range(_BYTE_TOKENS)] + [b"<|end|>"]
    special_token_ids = [_BYTE_TOKENS]

    def __call__(self, text: bytes | str) -> list[int]:
        return list(text.encode("utf-8") if isinstance(text, str) else text)


@functools.cache
def _tokenizer() -> Any:
    import llguidance

    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteVocabulary()), slices=[])


def _short(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= _MAX_QUOTED else message[:_MAX_QUOTED] + " …"


class FormatCheck:
    """The compiled check of one grammar format; ``problem(text)`` is None for text inside it, else what is
    wrong, in words for the model."""

    __slots__ = ("syntax", "_grammar", "_llguidance")

    def __init__(self, tool: str, syntax: str, definition: str) -> None:
        try:
            import llguidance
        except ImportError:
            raise ToolDeclarationError(
                f"tool {tool!r}: its {syntax} format can only be checked with llguidance, which is not installed: "
                f"{_EXTRA_HINT}", tool=tool, rule="grammar formats need the grammar extra") from None
        try:
            grammar = (llguidance.LLMatcher.grammar_from_lark(definition) if syntax == "lark"
                       else llguidance.LLMatcher.grammar_from_regex(definition))
            failed, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar, _tokenizer())
        except Exception as exc:  # noqa: BLE001 - the binding's own refusal of a definition
            failed, messages = True, [f"{type(exc).__name__}: {exc}"]
        if failed:
            raise ToolDeclarationError(
                f"tool {tool!r}: its {syntax} format does not compile for the provider's grammar engine: "
                f"{_short(messages[0] if messages else 'no reason given')}",
                tool=tool, rule=f"a {syntax} definition in the provider's syntax (LLGuidance; regexes in Rust "
                                "syntax: no look-around or back-reference)")
        self.syntax = syntax
        self._grammar = grammar
        self._llguidance = llguidance

    def _matcher(self) -> Any:
        return self._llguidance.LLMatcher(_tokenizer(), self._grammar, log_level=0)

    def problem(self, text: str) -> str | None:
        if len(text) > FORMAT_CHECK_MAX_CHARS:
            return (f"the text is {len(text):,} characters long; at most {FORMAT_CHECK_MAX_CHARS:,} are checked "
                    f"against the tool's {self.syntax} format")
        data = text.encode("utf-8", "surrogatepass")
        tokens = list(data)
        matcher = self._matcher()
        started = time.monotonic()
        consumed = _consume(matcher, tokens, started + FORMAT_CHECK_SECONDS)
        if consumed is None:
            return (f"the text could not be checked against the tool's {self.syntax} format within "
                    f"{FORMAT_CHECK_SECONDS:g} s (a grammar this ambiguous needs a shorter text)")
        if consumed and matcher.is_accepting():
            return None
        if not matcher.is_error():
            return f"the text ends before the tool's {self.syntax} format is complete"
        refused = f"the text does not match the tool's {self.syntax} format"
        if time.monotonic() - started > FORMAT_CHECK_SECONDS / 2:
            return refused  # finding where parses the text again: only while that fits in the budget
        fitted = self._matcher().validate_tokens(tokens)
        return f"{refused} from character {len(data[:fitted].decode('utf-8', 'ignore'))} on"


def _consume(matcher: Any, tokens: list[int], deadline: float) -> bool | None:
    """Feed ``tokens`` to ``matcher``: whether it took them all, or None when ``deadline`` passed first.

    The bytes go in small pieces first; a piece that was fed quickly (a regex, an unambiguous grammar: microseconds
    a byte) doubles the next one, a slow one (an ambiguous grammar, whose Earley rows grow with the text) cuts it
    down, so that the clock is read every few steps once parsing slows and the check stops within about one step
    of its deadline."""
    size, start = _FIRST_PIECE, 0
    while start < len(tokens):
        began = time.monotonic()
        if not matcher.consume_tokens(tokens[start:start + size]):
            return False
        start += size
        now = time.monotonic()
        if now > deadline:
            return None if start < len(tokens) else True
        if now - began < _FAST_PIECE_SECONDS:
            size = min(size * 2, _LARGEST_PIECE)
        elif now - began > _SLOW_PIECE_SECONDS:
            size = max(1, size // 16)
    return True


def format_check(tool: str, fmt: Mapping[str, Any] | None, enabled: bool) -> FormatCheck | None:
    """The check of a custom tool's (already well-formed) ``format``: None for no format, a text format or
    ``enabled=False``; raises ``ToolDeclarationError`` when a grammar format cannot be checked."""
    if not enabled or fmt is None or fmt.get("type") != "grammar":
        return None
    return FormatCheck(tool, fmt["syntax"], fmt["definition"])
