"""Handlers whose parameters are pydantic models or carry ``pydantic.Field`` metadata: pydantic describes and
validates them.

pydantic is optional (the ``pydantic`` extra). Nothing here imports it: a handler can only mention pydantic
types after its module imported pydantic, so ``uses_pydantic`` looks for it in ``sys.modules`` and every other
handler stays on the msgspec path.

* Schema: ``model_json_schema`` (validation mode, aliases), without the titles pydantic derives from field
  names; the caller inlines ``$defs`` as it does for msgspec schemas.
* Validation: ``model_validate_json(..., strict=True)`` on the argument object re-encoded as JSON, so values are
  judged as the JSON the model sent (no ``"12"`` → ``12``, ISO strings for dates, enum values), like the msgspec
  path. Each error's ``loc`` becomes a ``$``-rooted JSON path.
* A handler whose only parameter is a required pydantic model (``def book(req: BookingRequest)``) takes the
  model's fields as the tool's top-level arguments and is called with the model instance (``book(req=...)``);
  unknown argument names then follow the model's own ``extra`` setting.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import typing
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from .errors import ToolDeclarationError

if TYPE_CHECKING:
    from .tool import SchemaParameter

__all__ = ["uses_pydantic", "is_pydantic_field", "pydantic_arguments"]

#: packages whose types and ``Annotated`` metadata only pydantic understands (msgspec would ignore the metadata)
_PYDANTIC_PACKAGES = ("pydantic", "pydantic_core", "annotated_types")


def _is_pydantic_class(obj: type, pydantic: Any) -> bool:
    return (issubclass(obj, pydantic.BaseModel) or hasattr(obj, "__pydantic_validator__")
            or obj.__module__.partition(".")[0] in _PYDANTIC_PACKAGES)


def _mentions_pydantic(obj: Any, pydantic: Any, seen: set[int]) -> bool:
    if id(obj) in seen:
        return False
    seen.add(id(obj))
    if isinstance(obj, type):
        if _is_pydantic_class(obj, pydantic):
            return True
        if typing.is_typeddict(obj) or dataclasses.is_dataclass(obj):  # their fields may hold pydantic types
            try:
                hints = typing.get_type_hints(obj, include_extras=True)
            except Exception:  # noqa: BLE001 - unresolvable: msgspec will say so
                return False
            return any(_mentions_pydantic(h, pydantic, seen) for h in hints.values())
        return False
    if typing.get_origin(obj) is typing.Annotated:
        if any(type(m).__module__.partition(".")[0] in _PYDANTIC_PACKAGES for m in obj.__metadata__):
            return True
        return _mentions_pydantic(obj.__origin__, pydantic, seen)
    return any(_mentions_pydantic(arg, pydantic, seen) for arg in typing.get_args(obj))


def uses_pydantic(annotation: Any) -> bool:
    """Whether ``annotation`` mentions a pydantic model or dataclass, a pydantic type, or ``Annotated`` metadata of
    pydantic (``Field``) or annotated-types anywhere inside it."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and _mentions_pydantic(annotation, pydantic, set())


def is_pydantic_field(default: Any) -> bool:
    """Whether a parameter's default is a ``pydantic.Field(...)`` (which ``pydantic_arguments`` refuses)."""
    fields = sys.modules.get("pydantic.fields")  # a FieldInfo exists only once pydantic.fields is imported;
    # ``import pydantic`` alone does not import it (pydantic's attributes are loaded lazily)
    return fields is not None and isinstance(default, fields.FieldInfo)


def _single_model(params: Sequence[SchemaParameter], pydantic: Any) -> type | None:
    """The model of a handler whose only parameter is a required pydantic model (not a ``RootModel``)."""
    if len(params) != 1 or params[0].default is not inspect.Parameter.empty:
        return None
    ann = params[0].annotation
    if isinstance(ann, type) and issubclass(ann, pydantic.BaseModel) and not issubclass(ann, pydantic.RootModel):
        return ann
    return None


def pydantic_arguments(params: Sequence[SchemaParameter], tool: str
                       ) -> tuple[dict[str, Any], Callable[[Any], Any], Callable[[Any], dict[str, Any]], str]:
    """``(schema, validate, keywords, model_description)`` for a handler that uses pydantic types.

    ``schema`` is pydantic's (``$defs`` not yet inlined), ``validate(args)`` returns a model instance or raises
    ``ArgumentsInvalid``, ``keywords(value)`` the handler's keyword arguments, and ``model_description`` the
    docstring of a single-model signature's model (else ``""``).
    """
    import pydantic
    from pydantic.json_schema import GenerateJsonSchema

    from .tool import ArgumentsInvalid, arguments_error

    class _NoDerivedTitles(GenerateJsonSchema):
        def field_title_should_be_set(self, schema: Any) -> bool:
            return False  # "City" for ``city`` tells a model nothing; an explicit Field(title=...) is kept

    single = _single_model(params, pydantic)
    model: Any  # a pydantic model class
    if single is not None:
        model, pname = single, params[0].name

        def keywords(value: Any) -> dict[str, Any]:
            return {pname: value}
    else:
        fields: dict[str, Any] = {}
        for i, p in enumerate(params):
            if is_pydantic_field(p.default):
                raise ToolDeclarationError(
                    f"tool {tool!r}: parameter {p.name!r} has a pydantic Field as its default; declare the field "
                    f"in the annotation and the default after it: {p.name}: Annotated[T, Field(...)] = default",
                    tool=tool, rule="pydantic Field in Annotated")
            # field names of our own, the parameter names as aliases: a parameter may be named like a BaseModel
            # attribute (``schema``, ``copy``) or start with an underscore
            field = (pydantic.Field(alias=p.name) if p.default is inspect.Parameter.empty
                     else pydantic.Field(default=p.default, alias=p.name))
            fields[f"p{i}"] = (p.annotation, field)
        try:
            model = pydantic.create_model(f"{tool}_arguments", __config__=pydantic.ConfigDict(extra="forbid"),
                                          **fields)
        except (pydantic.PydanticUserError, TypeError, ValueError) as exc:
            raise _not_describable(tool, exc) from None
        names = [(f"p{i}", p.name) for i, p in enumerate(params)]

        def keywords(value: Any) -> dict[str, Any]:
            return {pname: getattr(value, field) for field, pname in names}
    try:
        schema = model.model_json_schema(schema_generator=_NoDerivedTitles)
    except (pydantic.PydanticUserError, TypeError, ValueError) as exc:
        raise _not_describable(tool, exc) from None
    description = inspect.cleandoc(single.__doc__) if single is not None and single.__doc__ else ""

    def validate(args: Any) -> Any:
        try:
            raw = msgspec.json.encode(args)
        except (TypeError, OverflowError) as exc:
            raise ArgumentsInvalid(f"the arguments are not JSON ({exc}) - at `$`", "$") from None
        try:
            return model.model_validate_json(raw, strict=True)
        except pydantic.ValidationError as exc:
            errors = exc.errors(include_url=False, include_context=False, include_input=False)
            raise arguments_error([(e["msg"], _json_loc(args, e["loc"], e["type"])) for e in errors]) from None

    return schema, validate, keywords, description


def _json_loc(args: Any, loc: Sequence[str | int], kind: str) -> list[str | int]:
    """The parts of pydantic's ``loc`` that are a path in ``args``: a ``loc`` also holds the tag of a union member
    (``A``, ``int``, ``cat``, ``function-after[...]``) and ``[key]`` for a dict key's error, which name nothing in
    the arguments. Keys and indexes present in the arguments are followed; anything else is dropped, except the
    last part of a ``missing`` error (the missing field's name)."""
    out: list[str | int] = []
    node = args
    for i, part in enumerate(loc):
        if isinstance(part, str) and isinstance(node, dict) and part in node:
            out.append(part)
            node = node[part]
        elif isinstance(part, int) and not isinstance(part, bool) and isinstance(node, list) \
                and -len(node) <= part < len(node):
            out.append(part)
            node = node[part]
        elif i == len(loc) - 1 and kind == "missing" and isinstance(node, dict) and isinstance(part, str):
            out.append(part)
    return out


def _not_describable(tool: str, exc: Exception) -> ToolDeclarationError:
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ToolDeclarationError(
        f"tool {tool!r}: pydantic cannot describe the parameter types ({first}). A handler that uses pydantic types "
        "is described by pydantic alone, so each of its parameter types must be one pydantic supports (no msgspec "
        "Structs; before Python 3.12, typing_extensions.TypedDict rather than typing.TypedDict)", tool=tool,
        rule="pydantic-supported parameter types")
