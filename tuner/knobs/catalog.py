"""The knob catalogue: PostgreSQL facts per major version, loaded from ``catalog.toml``.

Version semantics are data, not branches: callers ask ``catalog.spec("effective_io_concurrency", 150018)``
and get the range, context and default that hold for that server.
"""

from __future__ import annotations

import math
import tomllib
from functools import cache
from pathlib import Path
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict

from tuner.errors import ConfigError

_CATALOG_PATH = Path(__file__).with_name("catalog.toml")

# pg_settings.context, plus "device": a kernel setting of a block device (sysfs), not a PostgreSQL setting.
Context = Literal["internal", "postmaster", "sighup", "superuser-backend", "backend", "superuser", "user", "device"]


class VersionSpec(BaseModel):
    """What one knob is on servers whose version lies in ``[from_, to]``."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    from_: int
    to: int
    context: Context
    min: int | None = None
    max: int | None = None
    default: int | str
    values: tuple[str, ...] | None = None
    meaning: str | None = None


class KnobSpec(BaseModel):
    """A knob as it applies to one server version."""

    model_config = ConfigDict(frozen=True)

    name: str
    family: str
    kind: Literal["integer", "enum"]
    unit: str | None
    scopes: tuple[str, ...]
    doc: str
    server_version_num: int
    context: Context
    min: int | None
    max: int | None
    default: int | str
    values: tuple[str, ...] | None
    meaning: str | None

    @property
    def requires(self) -> Literal["reload", "restart", "reopen"]:
        """What a change needs to take effect: a reload, a restart, or (readahead) files opened anew."""
        if self.context == "postmaster":
            return "restart"
        if self.context == "device":
            return "reopen"
        return "reload"

    def clamp(self, value: int) -> int:
        """Clamp ``value`` into this version's range."""
        lo = self.min if self.min is not None else value
        hi = self.max if self.max is not None else value
        return max(lo, min(hi, value))


class Catalog:
    """All knobs tuner knows, with the durability settings it must never touch."""

    def __init__(self, raw: dict[str, object]) -> None:
        self._knobs: dict[str, dict[str, object]] = dict(cast(dict[str, dict[str, object]], raw.get("knobs", {})))
        # Screened, not searched (wal_compression): reports carry them, policies and names() do not.
        self._screened: dict[str, dict[str, object]] = dict(cast(dict[str, dict[str, object]],
                                                                 raw.get("screened", {})))
        self.never_touch: frozenset[str] = frozenset(cast(list[str], raw.get("never_touch", [])))
        overlap = self.never_touch & (self._knobs.keys() | self._screened.keys())
        if overlap:
            raise ValueError(f"catalog lists durability settings as knobs: {sorted(overlap)}")

    def names(self, family: str | None = None, *, scope: str | None = None) -> list[str]:
        """The searched knobs, of one family and/or settable at one scope ("system": by ALTER SYSTEM)."""
        return sorted(n for n, k in self._knobs.items()
                      if (family is None or k["family"] == family)
                      and (scope is None or scope in cast(list[str], k["scopes"])))

    def knows(self, name: str) -> bool:
        return name in self._knobs

    def spec(self, name: str, server_version_num: int) -> KnobSpec | None:
        """The knob as it is on that server version, or None if the server does not have it."""
        return _spec(name, self._knobs.get(name), server_version_num)

    def reported_names(self) -> list[str]:
        """Every setting a report may recommend: the searched knobs and the screened ones."""
        return sorted(self._knobs.keys() | self._screened.keys())

    def family_of(self, name: str) -> str | None:
        """The family that tunes ``name`` (searched or screened), None for a setting tuner does not tune."""
        raw = self._knobs.get(name, self._screened.get(name))
        return None if raw is None else str(raw["family"])

    def reported(self, name: str, server_version_num: int) -> KnobSpec | None:
        """Like :meth:`spec`, for any setting a report may recommend (searched or screened)."""
        return _spec(name, self._knobs.get(name, self._screened.get(name)), server_version_num)


def _spec(name: str, raw: dict[str, object] | None, server_version_num: int) -> KnobSpec | None:
    if raw is None:
        return None
    for entry in raw["versions"]:  # type: ignore[attr-defined]
        v = VersionSpec(**{("from_" if k == "from" else k): val for k, val in entry.items()})
        if v.from_ <= server_version_num <= v.to:
            return KnobSpec(
                name=name,
                family=str(raw["family"]),
                kind=raw["kind"],  # type: ignore[arg-type]
                unit=raw.get("unit"),  # type: ignore[arg-type]
                scopes=tuple(raw["scopes"]),  # type: ignore[arg-type]
                doc=str(raw.get("doc", "")),
                server_version_num=server_version_num,
                context=v.context,
                min=v.min,
                max=v.max,
                default=v.default,
                values=v.values,
                meaning=v.meaning,
            )
    return None


@cache
def load() -> Catalog:
    """The packaged catalogue (parsed once)."""
    with _CATALOG_PATH.open("rb") as fh:
        return Catalog(tomllib.load(fh))


def require_tunable(name: str) -> None:
    """Raise a :class:`ConfigError` if ``name`` is a durability setting or unknown."""
    catalog = load()
    if name in catalog.never_touch:
        raise ConfigError(
            f"'{name}' is a durability setting; tuner never changes it",
            hint="remove it from the policy's [search] table",
        )
    if not catalog.knows(name):
        raise ConfigError(
            f"'{name}' is not a knob tuner knows",
            hint=f"known knobs: {', '.join(catalog.names())}",
        )


def eic_pre13_to_13(old_value: int) -> int:
    """Convert a pre-13 ``effective_io_concurrency`` (spindles) to the 13+ meaning (prefetch distance).

    new = round(sum_{n=1..old} old/n), clamped to the 13+ maximum of 1000 (release notes of 13).
    """
    if old_value < 0:
        raise ValueError("effective_io_concurrency cannot be negative")
    if old_value == 0:
        return 0
    total = math.fsum(old_value / n for n in range(1, old_value + 1))
    return min(1000, int(math.floor(total + 0.5)))
