"""The declarations part of a dialect record: what a dialect module implements so that ``declare``, ``audit``,
``load_tools`` and request building work for it, with a default for everything but the two translations."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, ClassVar

from ...schema_tools import Loss
from ._common import Approximation, ChoiceResult, ToolChoice, ToolSpec

__all__ = ["Declarations", "nest", "lookup"]


def nest(path: Sequence[str], value: Any) -> dict[str, Any]:
    """``{"a": {"b": value}}`` for the path ``("a", "b")``."""
    out: Any = value
    for key in reversed(path):
        out = {key: out}
    return out  # type: ignore[no-any-return]


def lookup(doc: Any, path: Sequence[str]) -> Any:
    """The value at ``path`` in ``doc`` (nested objects), or None when some key is missing."""
    for key in path:
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(key)
    return doc


class Declarations:
    """How one dialect declares tools and a tool choice in a request body.

    A dialect implements ``declare_tool`` and ``choice_fragment``; everything else has a default that fits a
    dialect whose request carries a top-level ``tools`` list:

    * ``tools_at``: where the list of tool declarations goes in a request body, as a path of keys from the top
      (default ``("tools",)``; a dialect that nests them, in a tool configuration object for instance, gives the
      whole path). ``tools_value`` is what goes there (default: the declarations as a list; a dialect that groups
      them, as Gemini's ``functionDeclarations``, wraps them) and ``tools_fragment`` the request fragment holding it.
      ``declare`` merges that fragment and the choice's key by key (``toolwire.codecs.requests.merge_body``), so
      the tools and the choice may share an object; the portability audit and the request-size limit read the
      tools back from ``tools_at``, and ``load_tools`` finds a dialect's tool list there in a request body.
    * ``choice_fragment``: the tool choice as a request fragment, its value at ``choice_at`` (default
      ``("tool_choice",)``: a top-level field; or in a configuration object, next to the tools), with whatever
      else the choice needs (a parallel-calls switch), plus the declared tools to keep when the dialect can only
      restrict a choice by declaring fewer, and an ``Approximation`` for everything it cannot express exactly.
      ``custom`` names the declared custom (free-text) tools; a dialect without custom tools never gets any
      (``declare`` refuses them first, from ``Capabilities.tool_kinds``).
    * ``schema_of``: the input schema a declaration sends (default: its ``parameters``), for the limit checks.
    * ``strict_warnings``: what ``strict`` cannot mean exactly in the dialect (default: nothing).
    * ``read_tool`` and ``tool_group``: the tool-list reader (``load_tools``). ``read_tool(raw)`` turns one
      entry of a tools list written in this dialect's shape into ``{"name", "description", "input_schema"}`` (a
      custom tool: ``{"name", "description", "kind": "custom", "format"}``), or returns None when ``raw`` is
      not in its shape; ``tool_group(raw)`` returns the entries one list item holds when the dialect groups
      several in one (default: None, it does not). Canonical and MCP entries are read before any dialect's.
    """

    #: the dialect id
    dialect: ClassVar[str]
    #: where the tools list goes in a request body
    tools_at: ClassVar[tuple[str, ...]] = ("tools",)
    #: where the tool choice goes in a request body
    choice_at: ClassVar[tuple[str, ...]] = ("tool_choice",)

    def declare_tool(self, spec: ToolSpec, *, strict: bool = False, schema_mode: str = "json_schema"
                     ) -> tuple[dict[str, Any], tuple[Loss, ...]]:
        """One tool's declaration and the schema losses. Raises ``StrictSchemaError`` /
        ``SchemaConversionError`` for a schema the dialect cannot express, ``DeclarationLimitError`` for a kind
        of tool it does not declare."""
        raise NotImplementedError

    def choice_fragment(self, choice: ToolChoice, names: Sequence[str], *, strict: bool = False,
                        custom: Collection[str] = ()) -> ChoiceResult:
        """The request fragment for ``choice`` over the declared tool ``names`` (see the class docstring).
        Raises ``ToolChoiceError`` for a name that is not declared."""
        raise NotImplementedError

    def schema_of(self, declaration: dict[str, Any]) -> dict[str, Any]:
        """The input schema ``declaration`` sends."""
        schema = declaration.get("parameters")
        return schema if isinstance(schema, dict) else {}

    def tools_value(self, declarations: list[dict[str, Any]]) -> Any:
        """What goes at ``tools_at``."""
        return declarations

    def tools_fragment(self, declarations: list[dict[str, Any]]) -> dict[str, Any]:
        """The request fragment declaring ``declarations``."""
        return nest(self.tools_at, self.tools_value(declarations))

    def tools_in(self, fragment: Mapping[str, Any]) -> Any:
        """The tools a request fragment (or body) holds at ``tools_at``, or None."""
        return lookup(fragment, self.tools_at)

    def choice_in(self, fragment: Mapping[str, Any]) -> Any:
        """The tool choice a request fragment (or body) holds at ``choice_at``, or None."""
        return lookup(fragment, self.choice_at)

    def strict_warnings(self, strict: bool) -> tuple[Approximation, ...]:
        """What ``strict`` is sent as, when the dialect cannot mean it exactly."""
        return ()

    def read_tool(self, raw: Mapping[str, Any], index: int) -> dict[str, Any] | None:
        """Entry ``index`` of a tools list, in this dialect's shape, as a canonical entry; None when it is not in
        this dialect's shape. Raises ``ToolDeclarationError`` for an entry in its shape that cannot be used."""
        return None

    def tool_group(self, raw: Mapping[str, Any]) -> list[Any] | None:
        """The tool entries one item of a tools list stands for, when this dialect groups several in one."""
        return None
