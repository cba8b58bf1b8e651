"""The sections families own, as the lower layers see them: a policy table or a few keys of the JSON report that
belong to one family, whose model the family declares (``policy_section``, ``report_section``).

:class:`tuner.settings.policy.Policy` and :class:`tuner.report.model.Report` sit below the families and cannot import them, so
the families' registry installs the lookup here when it is imported (:func:`install`): the lower layers ask it,
by kind, which family owns which model, and split a policy file's tables or a report's top-level keys among the
families by it. Nothing here knows a family by name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

Kind = Literal["policy", "report"]
Lookup = Callable[[Kind], Mapping[str, type[BaseModel]]]

REGISTRY_MODULE = "tuner.families"
_lookup: Lookup | None = None


def install(lookup: Lookup) -> None:
    """Where :func:`types` finds the families' sections (the families' registry, once imported)."""
    global _lookup
    _lookup = lookup


def types(kind: Kind) -> Mapping[str, type[BaseModel]]:
    """Per family that declares one, the model of its ``kind`` of section.

    A policy or a report may be read before anything imported the registry (a script that only loads a
    policy): the registry is then imported by name, as it imports its own families by name, so that this layer
    needs no import of the layer above it."""
    if _lookup is None:
        importlib.import_module(REGISTRY_MODULE)  # installs the lookup
    assert _lookup is not None, f"{REGISTRY_MODULE} did not install the sections' lookup"
    return _lookup(kind)


def validated(owner: str, family: str, model: type[BaseModel], data: Any, *,
              under: tuple[str, ...] | None = None) -> BaseModel:
    """``data`` as ``family``'s section; if it is not one, a :class:`ValidationError` whose locations are under
    ``under`` (default: the family, so a policy's error names its table, ``[wal] clients``, as pydantic does for a
    field; a report's flat keys need none)."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise relocated(owner, exc, (family,) if under is None else under) from None


def relocated(owner: str, exc: ValidationError, prefix: tuple[str, ...]) -> ValidationError:
    """``exc`` with every error's location under ``prefix``."""
    return ValidationError.from_exception_data(owner, [_detail(e, prefix) for e in exc.errors()])


def _detail(error: Mapping[str, Any], prefix: tuple[str, ...]) -> Any:
    out = {"type": error["type"], "loc": (*prefix, *error["loc"]), "input": error.get("input")}
    if error.get("ctx"):
        out["ctx"] = error["ctx"]
    return out


def sectioned(owner: str, data: Mapping[str, Any], own: Iterable[str], kind: Kind, *, by_field: bool,
              every: bool, under: tuple[str, ...] | None = None) -> dict[str, Any]:
    """``data`` (a model's input) with ``data["sections"]``: per family, its keys validated into its model (see
    :func:`split` and :func:`validated`). ``every``: every family that declares a model gets its section (its
    defaults where ``data`` has nothing of it). A section given for a family that declares no model stays only
    when it is already a model (a family registered and gone again, in tests); else it is refused."""
    out = split(data, own, kind, by_field=by_field)
    models, given = types(kind), out["sections"]
    names = [*models, *(f for f in given if f not in models)] if every else list(given)
    checked: dict[str, BaseModel] = {}
    for family in names:
        model, value = models.get(family), given.get(family, {})
        if model is None and not isinstance(value, BaseModel):
            raise ValueError(f"no family {family!r} with a {kind} section")
        checked[family] = value if model is None else validated(owner, family, model, value, under=under)
    out["sections"] = checked
    return out


def split(data: Mapping[str, Any], own: Iterable[str], kind: Kind, *, by_field: bool) -> dict[str, Any]:
    """``data`` with the keys the families own moved into ``data["sections"]`` (family → its keys' values).

    ``by_field``: a family owns the keys that are its section's fields (the report's flat keys); else the key
    that is the family's name (a policy's table). Keys nobody owns stay where they were, for the model's
    ``extra="forbid"`` to refuse."""
    own = set(own)
    out = {k: v for k, v in data.items() if k in own}
    sections: dict[str, Any] = dict(out.get("sections") or {})
    rest = {k: v for k, v in data.items() if k not in own}
    for family, model in types(kind).items():
        keys = [k for k in rest if (k in model.model_fields if by_field else k == family)]
        if not keys or family in sections:
            continue
        values = {k: rest.pop(k) for k in keys}
        sections[family] = values if by_field else values[family]
    out.update(rest)
    out["sections"] = sections
    return out
