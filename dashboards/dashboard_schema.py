"""A dashboard's JSON checked against Grafana's dashboard schema, as ``grafana-foundation-sdk`` types it.

:func:`problems` lists what does not conform, one line each; none for a conforming board. A board conforms when

- it decodes into the SDK's typed models and encodes back to itself: every key is one the schema knows (decoding
  drops the others), no field the schema requires is missing (decoding would fill in a default), and every value
  reads back as it was written; panel options and field config of Grafana's own panels decode into their panel's
  typed models through the SDK's plugin registry, the ClickHouse query into :class:`dashboard_kit.ClickHouseQuery`,
  and a query of any other data source is refused;
- every value has the type its field declares: numbers, strings and booleans where they belong, enums among
  their members, ``Literal`` fields among their values (decoding copies values as they are, so a misspelt enum
  survives it and is caught here).

The SDK's models are generated from Grafana's CUE schemas (the kinds behind ``@grafana/schema``); parts that the
schema leaves open (a panel's ``links`` and ``transformations``, the options of a panel without a schema such as
``traces``) are checked no deeper than the schema checks them.
"""

from __future__ import annotations

import enum
import json
import types
import typing
from typing import Any

import dashboard_kit
from grafana_foundation_sdk.cog import plugins
from grafana_foundation_sdk.cog import runtime as cogruntime
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as dashboard_m

plugins.register_default_plugins()  # the core panels' options and the core data sources' queries
_ = dashboard_kit.ClickHouseQuery  # registered with the runtime on import


def problems(board: dict[str, Any]) -> list[str]:
    """What in ``board`` (a dashboard's JSON model) does not conform to the schema; empty when it all does."""
    try:
        model = dashboard_m.Dashboard.from_json(board)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        return [f"does not decode into the schema's models: {type(e).__name__} {e}"]
    out: list[str] = []
    given = {k: v for k, v in board.items() if not (k == "id" and v is None)}  # the schema allows a null id
    _diff(given, model, "", out)
    _typecheck(model, "", out)
    return out


def _diff(given: Any, canonical: Any, path: str, out: list[str]) -> None:
    """``given`` (JSON) against what it decoded to (SDK models, or JSON values where the schema is open)."""
    if hasattr(type(canonical), "to_json"):
        if not isinstance(given, dict):
            out.append(f"{path}: {json.dumps(given)[:60]} is not an object")
            return
        level, required = canonical.to_json(), _required(type(canonical))
        for k in sorted(given.keys() - level.keys()):
            out.append(f"{path}.{k}: not in the schema")
        missing = level.keys() - given.keys()
        for k in sorted(missing if required is None else missing & required):
            out.append(f"{path}.{k}: missing (required)")
        for k in sorted(given.keys() & level.keys()):
            _diff(given[k], level[k], f"{path}.{k}", out)
    elif isinstance(canonical, dict) and isinstance(given, dict):
        for k in sorted(given.keys() & canonical.keys()):
            _diff(given[k], canonical[k], f"{path}.{k}", out)
    elif isinstance(canonical, list) and isinstance(given, list) and len(given) == len(canonical):
        for i, (g, c) in enumerate(zip(given, canonical, strict=True)):
            _diff(g, c, f"{path}[{i}]", out)
    else:
        back = json.loads(json.dumps(canonical, cls=JSONEncoder))
        if given != back or type(given) is not type(back):
            out.append(f"{path}: {json.dumps(given)[:60]} reads back as {json.dumps(back)[:60]}")


_REQUIRED: dict[type, frozenset[str] | None] = {}


def _required(cls: type) -> frozenset[str] | None:
    """The keys a model always writes: those left when every optional field is None (None: all it writes)."""
    if cls not in _REQUIRED:
        try:
            bare = cls()
        except TypeError:  # a model with no bare form (a query): everything it writes is required
            _REQUIRED[cls] = None
            return None
        for name, hint in typing.get_type_hints(cls).items():
            if type(None) in typing.get_args(hint):
                setattr(bare, name, None)
        _REQUIRED[cls] = frozenset(bare.to_json())
    return _REQUIRED[cls]


def _typecheck(obj: object, path: str, out: list[str]) -> None:
    """Every annotated attribute of an SDK model (and of the models inside it) against its annotation."""
    if isinstance(obj, cogruntime.UnknownDataquery):
        out.append(f"{path}: a query of a data source the schema check does not know")
        return
    for name, hint in typing.get_type_hints(type(obj)).items():
        if name.startswith("_") or typing.get_origin(hint) is typing.ClassVar:
            continue
        _check(getattr(obj, name, None), hint, f"{path}.{_key(name)}", out)


def _check(value: Any, hint: Any, path: str, out: list[str]) -> None:
    if not _fits(value, hint, path, out):
        out.append(f"{path}: {json.dumps(value, default=repr)[:60]} is not {_name(hint)}")


def _fits(value: Any, hint: Any, path: str, out: list[str]) -> bool:
    """Whether ``value`` has the type ``hint``; problems inside a model or a container go to ``out``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any or hint is object:  # open in the schema, or a plugin's part (options, field config)
        if hasattr(type(value), "to_json"):  # decoded by its plugin into its typed model: check that
            _typecheck(value, path, out)
        return True
    if origin in (typing.Union, types.UnionType):
        fitting = [a for a in args if _fits(value, a, path, [])]
        if not fitting:
            return False
        return _fits(value, fitting[0], path, out)
    if hint is type(None):
        return value is None
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if origin is list:
        if not isinstance(value, list):
            return False
        for i, item in enumerate(value):
            _check(item, args[0] if args else typing.Any, f"{path}[{i}]", out)
        return True
    if origin is dict:
        if not isinstance(value, dict):
            return False
        for k, item in value.items():
            _check(item, args[1] if args else typing.Any, f"{path}.{k}", out)
        return True
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        base = int if issubclass(hint, int) else str
        return isinstance(value, base) and not isinstance(value, bool) and value in {m.value for m in hint}
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if isinstance(hint, type):
        if not isinstance(value, hint):
            return False
        _typecheck(value, path, out)
        return True
    return True  # a form the SDK's models do not use


def _key(attr: str) -> str:
    """The JSON key of a model attribute, as the SDK names them (``graph_tooltip`` → ``graphTooltip``)."""
    head, *rest = attr.removesuffix("_val").split("_")
    return head + "".join(w.capitalize() for w in rest)


def _name(hint: Any) -> str:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_name(a) for a in args)
    if typing.get_origin(hint) is typing.Literal:
        return " or ".join(json.dumps(a) for a in typing.get_args(hint))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return f"a {hint.__name__} ({', '.join(json.dumps(m.value) for m in hint)})"
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
