"""The closed registry: built once from a list of tools, frozen, exact-name lookup only.

There is no attribute lookup, no case folding and no normalisation: a hallucinated name (``Save_Measurement``,
``multi_tool_use.parallel``, ``functions.save_measurement``) never maps onto a real tool.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from .errors import DuplicateToolError, ToolDeclarationError
from .tool import Tool

__all__ = ["Registry", "assert_registry_matches"]


class Registry:
    """A closed, frozen set of tools keyed by exact name.

    ``registry.get(name)`` returns the tool or None; ``name in registry``, ``registry[name]``, ``len``,
    iteration (declaration order) and ``registry.names`` work as expected. Nothing can be added or removed
    after construction.
    """

    __slots__ = ("_tools", "_by_name")

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        ordered: list[Tool] = []
        by_name: dict[str, Tool] = {}
        for tool in tools:
            if not isinstance(tool, Tool):
                raise ToolDeclarationError(f"Registry accepts Tool objects, got {type(tool).__name__}",
                                           tool=getattr(tool, "name", None), rule="Tool instances")
            if tool.name in by_name:
                raise DuplicateToolError(f"tool name {tool.name!r} is declared twice", tool=tool.name,
                                         rule="unique names")
            by_name[tool.name] = tool
            ordered.append(tool)
        object.__setattr__(self, "_tools", tuple(ordered))
        object.__setattr__(self, "_by_name", MappingProxyType(by_name))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("Registry is frozen: build a new one instead")

    def __delattr__(self, key: str) -> None:
        raise AttributeError("Registry is frozen")

    # ---- exact-name lookup ------------------------------------------------------------------------------
    def get(self, name: object) -> Tool | None:
        """The tool named exactly ``name``, or None."""
        if not isinstance(name, str):
            return None
        return self._by_name.get(name)

    def __getitem__(self, name: str) -> Tool:
        tool = self.get(name)
        if tool is None:
            raise KeyError(name)
        return tool

    def __contains__(self, name: object) -> bool:
        return self.get(name) is not None

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> tuple[str, ...]:
        """Tool names in declaration order."""
        return tuple(t.name for t in self._tools)

    @property
    def tools(self) -> Mapping[str, Tool]:
        """A read-only mapping of name to tool."""
        return self._by_name

    def __repr__(self) -> str:
        return f"Registry({list(self.names)!r})"

    # ---- consistency with what was published to the model ------------------------------------------------
    def check_handlers(self, published: Iterable[Any]) -> None:
        """Raise ``AssertionError`` with a diff when the tools published to a model and this registry differ.

        ``published`` holds names, ``Tool`` objects, or mappings with a ``"name"`` key (canonical or MCP
        declarations). A published tool without a handler here, or a handler here that was not published,
        fails. Meant for applications' tests.
        """
        published_names: list[str] = []
        for item in published:
            if isinstance(item, str):
                published_names.append(item)
            elif isinstance(item, Tool):
                published_names.append(item.name)
            elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
                published_names.append(item["name"])
            else:
                raise TypeError(f"cannot read a tool name from {item!r}")
        pub = set(published_names)
        mine = set(self.names)
        no_handler = sorted(pub - mine)
        unpublished = sorted(mine - pub)
        dupes = sorted({n for n in published_names if published_names.count(n) > 1})
        if not (no_handler or unpublished or dupes):
            return
        lines = ["registry and published tools differ:"]
        lines += [f"  - published without a handler: {n!r}" for n in no_handler]
        lines += [f"  + handler not published:       {n!r}" for n in unpublished]
        lines += [f"  ! published more than once:    {n!r}" for n in dupes]
        raise AssertionError("\n".join(lines))


def assert_registry_matches(registry: Registry, published: Iterable[Any]) -> None:
    """Fail (``AssertionError`` with a diff) unless ``published`` and ``registry`` name the same tools."""
    registry.check_handlers(published)
