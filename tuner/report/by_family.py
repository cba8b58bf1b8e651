"""The sections families own, as the lower layers see them: a policy table or a few keys of the JSON report that
belong to one family, whose model the family declares (``policy_section``, ``report_section``).

:class:`tuner.settings.policy.Policy` and :class:`tuner.report.model.Report` sit below the families and cannot import them, so
the families' registry is given to this module (:func:`install`): :mod:`tuner.families` passes its ``REGISTRY``
in where it defines it, so importing the registry is what makes policies and reports readable. The lower layers
ask it, by kind, which family owns which model, and split a policy file's tables or a report's top-level keys
among the families by it. Nothing here knows a family, or the registry's module, by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ValidationError

Kind = Literal["policy", "report"]


class Source(Protocol):
    """What this module asks of the families' registry (:class:`tuner.families.base.Registry` is one)."""

    def section_types(self, kind: Kind) -> Mapping[str, type[BaseModel]]: ...


_source: Source | None = None


def install(source: Source) -> None:
    """Where :func:`types` finds the families' sections: the families' registry (or, in a test, a stand-in)."""
    global _source
    _source = source


def types(kind: Kind) -> Mapping[str, type[BaseModel]]:
    """Per family that declares one, the model of its ``kind`` of section.

    A policy or a report read before the registry was installed would lose its families' sections, so that is
    refused: a program that reads one imports :mod:`tuner.families` first (the command line, the daemon and the
    test suite do)."""
    if _source is None:
        raise RuntimeError("the families' registry is not installed, so a policy's or a report's family sections "
                           "cannot be read: import tuner.families first (it installs its REGISTRY here)")
    return _source.section_types(kind)


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
