"""Policies: declarative TOML per storage class — search space, budgets, minimum effect, each family's workload,
cache state and guardrails. Data, no code. Every number has bounds (see each field); inf and nan are refused.

A policy is found by name in ``policies/`` next to the config file, in ``$TUNER_POLICY_DIR``, or in the
``policies/`` folder that ships with tuner; a value containing ``/`` or ending in ``.toml`` is a path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SerializeAsAny, ValidationError, model_validator

from tuner.report import by_family
from tuner.settings.config import Section, _describe
from tuner.errors import ConfigError
from tuner.knobs import catalog
from tuner.log import get_logger
from tuner.settings.tomlfile import read_toml


def _shipped_policy_dir() -> Path:
    """The shipped policies: tuner/_policies inside an installed wheel (pyproject maps the repository's top-level
    policies/ there), else policies/ beside the package in a source checkout or an editable install."""
    package = Path(__file__).resolve().parents[1]
    installed = package / "_policies"
    return installed if installed.is_dir() else package.parent / "policies"


SHIPPED_POLICY_DIR = _shipped_policy_dir()
log = get_logger("tuner.policy")


INT32 = 2**31 - 1  # PostgreSQL's integer settings are 32-bit
VALUES_MAX = 64  # the longest list of values a policy may give
_VALUES = VALUES_MAX


class PolicyInfo(Section):
    name: str
    description: str
    # Deprecated: never read (the name and the description say what storage a policy is for). Still accepted,
    # and still checked, because policies written before carry it; loading one says so (see DEPRECATED).
    storage_class: Literal["any", "ssd", "nvme", "network", "hdd"] | None = None


class Objective(Section):
    """Deprecated: never read. Each family measures its own objective (a workload's execution time, ms per
    transaction, the standby's replay time); the only values this table ever allowed are these defaults."""

    metric: Literal["execution_time_ms"] = "execution_time_ms"
    direction: Literal["minimize"] = "minimize"


# Keys tuner accepts but does not read, with what to do instead: loading a policy that has one logs a warning.
DEPRECATED = {
    "[policy] storage_class": "remove it: tuner does not read it; the policy's name and description say what "
                              "storage it is for",
    "[objective]": "remove it: tuner does not read it; each family measures its own objective (see docs/policies.md)",
    "[readahead]/[concurrency] seq_scan_weight, bitmap_scan_weight":
        "move them to [read_path]: one workload serves the read path's families (see docs/policies.md)",
}


class KnobSearch(Section):
    """How one knob is searched. ``scale = "log2p1"`` searches log2(1 + value), so 0 stays reachable."""

    min: int = Field(ge=-INT32 - 1, le=INT32)
    max: int = Field(ge=-INT32 - 1, le=INT32)
    scale: Literal["log2p1", "linear"] = "log2p1"
    initial: tuple[int, ...] = Field(default=(), max_length=_VALUES,
                                     description="values probed first, before the model proposes")
    today_first: bool = Field(
        default=True,
        description="a one-knob search probes today's value before the starting values (false: only where the "
        "model asks for it; the confirmation measures today's value anyway)",
    )
    joint_initial: tuple[int, ...] = Field(
        default=(), max_length=_VALUES,
        description="this knob's starting values in a joint search (default: the first, the middle and the last "
        "of initial)",
    )

    @model_validator(mode="after")
    def _ordered(self) -> KnobSearch:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is larger than max ({self.max})")
        if self.scale == "log2p1" and self.min < 0:
            raise ValueError("log2p1 scale needs min >= 0")
        for key, values in (("initial", self.initial), ("joint_initial", self.joint_initial)):
            outside = [v for v in values if not self.min <= v <= self.max]
            if outside:
                raise ValueError(f"{key} values {outside} lie outside [{self.min}, {self.max}]")
        return self


# Interim looks at most: a bound, not advice. Each look raises the Pocock level of all of them, and only the shipped
# designs' coverage is measured (benchmarks/confidence.py).
_MAX_LOOKS = 8


def _confirmation_design(min_pairs: int, max_pairs: int, looks: tuple[int, ...]) -> None:
    """The checks shared by [budget] and [daemon]: pairs come in ABBA blocks of 2, and the looks rise from
    ``confirm_min_pairs`` through ``confirm_looks`` to ``confirm_max_pairs``."""
    for key, n in (("confirm_min_pairs", min_pairs), ("confirm_max_pairs", max_pairs)):
        if n % 2:
            raise ValueError(f"{key} ({n}) is odd: confirmation pairs come in ABBA blocks of 2, so use even numbers")
    if min_pairs > max_pairs:
        raise ValueError(f"confirm_min_pairs ({min_pairs}) exceeds confirm_max_pairs ({max_pairs})")
    odd = [n for n in looks if n % 2]
    if odd:
        raise ValueError(f"confirm_looks {odd} are odd: confirmation pairs come in ABBA blocks of 2, so use even "
                         "numbers")
    if any(not min_pairs < n < max_pairs for n in looks) or list(looks) != sorted(set(looks)):
        raise ValueError(f"confirm_looks {list(looks)} must rise strictly between confirm_min_pairs ({min_pairs}) "
                         f"and confirm_max_pairs ({max_pairs})")


class Budget(Section):
    probes: int = Field(default=14, ge=3, le=500, description="most optimisation probes per family")
    joint_probes: int = Field(
        default=20, ge=3, le=500, description="probes of a joint search (read_ahead_kb x effective_io_concurrency)"
    )
    min_probes: int = Field(default=7, ge=2, le=500, description="probes before the stopping rule may end the search")
    patience: int = Field(default=3, ge=1, le=500, description="probes without a better predicted optimum before stopping")
    confirm_min_pairs: int = Field(default=6, ge=2, le=1000, description="paired trials before the first look")
    confirm_max_pairs: int = Field(default=16, ge=2, le=1000, description="paired trials at most (in ABBA blocks of 2)")
    confirm_looks: tuple[int, ...] = Field(
        default=(), max_length=_MAX_LOOKS,
        description="paired trials at the interim looks between the first and the last (none: two looks)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Budget:
        if self.min_probes > self.probes:
            raise ValueError(f"min_probes ({self.min_probes}) exceeds probes ({self.probes})")
        _confirmation_design(self.confirm_min_pairs, self.confirm_max_pairs, self.confirm_looks)
        return self


class Daemon(Section):
    """``tuner daemon``'s confirmation budget: it probes in maintenance windows, where time is cheap, so it
    confirms longer than ``tuner recommend`` — to 120 pairs, with interim looks that stop big effects early.
    Measured by ``benchmarks/confidence.py --profile daemon`` (docs/decisions.md, "The daemon's confirmation
    budget"): power >= 0.8 for a true 10 % improvement at noise CV 5 % and 10 % with the default minimum effect."""

    confirm_min_pairs: int = Field(default=6, ge=2, le=1000, description="paired trials before the first look")
    confirm_max_pairs: int = Field(default=120, ge=2, le=1000, description="paired trials at most")
    confirm_looks: tuple[int, ...] = Field(
        default=(20, 48), max_length=_MAX_LOOKS,
        description="paired trials at the interim looks, rising strictly between the first and the last",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Daemon:
        _confirmation_design(self.confirm_min_pairs, self.confirm_max_pairs, self.confirm_looks)
        return self


class DecisionPolicy(Section):
    min_effect: float = Field(default=1.05, ge=1.0, le=100, description="the CI's lower end must clear this improvement")
    alpha: float = Field(default=0.05, gt=0, lt=0.5, description="error rate of the whole sequential confirmation")
    near_optimal_tolerance: float = Field(
        default=0.05, ge=0, lt=1, description="the search's tolerance: it stops when no value is expected to beat "
        "the best by a quarter of it, and rounds its answer within half of it; the near-optimal range is the values "
        "the measurements cannot tell apart from the best by more than min_effect"
    )


class Cache(Section):
    state: Literal["cold"] = "cold"
    min_cold_read_fraction: float = Field(
        default=0.9, gt=0, le=1, description="a probe is rejected if fewer of its heap blocks came from disk"
    )


class Mix(Section):
    """A workload of cold sequential scans and sparse bitmap heap scans, as the families that probe one declare
    it in their tables. The objective is ``seq_scan_weight * seq_ms + bitmap_scan_weight * bitmap_ms``."""

    seq_scan_weight: float = Field(default=1.0, ge=0, le=1000, description="weight of the sequential scan's time")
    bitmap_scan_weight: float = Field(default=1.0, ge=0, le=1000, description="weight of the bitmap heap scan's time")

    @model_validator(mode="after")
    def _some_weight(self) -> Mix:
        if self.seq_scan_weight == 0 and self.bitmap_scan_weight == 0:
            raise ValueError("seq_scan_weight and bitmap_scan_weight cannot both be 0")
        return self


class Guardrails(Section):
    statement_timeout_s: float = Field(default=300, gt=0, le=86400, description="seconds, at most 86400 (a day)")
    allow_restart: bool = Field(default=True, description="may tuner restart the staging server between probes")
    max_failed_probes: int = Field(default=4, ge=1, le=100, description="consecutive failed probes that end a family")


class Policy(Section):
    policy: PolicyInfo
    objective: Objective | None = None  # deprecated, see DEPRECATED
    search: dict[str, KnobSearch]
    budget: Budget = Budget()
    daemon: Daemon = Daemon()
    decision: DecisionPolicy = DecisionPolicy()
    cache: Cache = Cache()
    guardrails: Guardrails = Guardrails()
    # The read path's workload, one for every family that probes it (readahead, concurrency): issue #53.
    read_path: Mix = Mix()
    # Per family, its own table (the model it declares as ``policy_section``), under the family's name: [wal].
    sections: dict[str, SerializeAsAny[Section]] = Field(default_factory=dict)
    # The tables the read path's weights were read from where a policy written before [read_path] sets them in
    # [readahead] or [concurrency] (loading it says so: :func:`deprecated_keys`). Not a key of the file.
    legacy_read_path: tuple[str, ...] = Field(default=(), exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _family_tables(cls, data: Any) -> Any:
        """Each family's table into its section, its defaults where the file has none."""
        if not isinstance(data, dict):
            return data
        data = _one_read_path(by_family.split(data, cls.model_fields, "policy", by_field=False))
        return by_family.sectioned(cls.__name__, data, cls.model_fields, "policy", by_field=False, every=True)

    def section(self, family: str) -> Any:
        """``family``'s table, as the model the family declares (see :class:`tuner.families.base.Family`)."""
        return self.sections[family]

    @model_validator(mode="after")
    def _knobs_known(self) -> Policy:
        if not self.search:
            raise ValueError("the [search] table is empty")
        for name in self.search:
            catalog.require_tunable(name)
        return self

    def for_daemon(self) -> Policy:
        """This policy as ``tuner daemon`` runs it: the [daemon] table's confirmation budget (pairs and looks)
        in place of [budget]'s, everything else as it is — so ``confirmation_test(policy.for_daemon())`` is the
        daemon's test."""
        d = self.daemon
        budget = Budget.model_validate({
            **self.budget.model_dump(),
            "confirm_min_pairs": d.confirm_min_pairs, "confirm_max_pairs": d.confirm_max_pairs,
            "confirm_looks": d.confirm_looks,
        })
        return self.model_copy(update={"budget": budget})


WEIGHTS = ("seq_scan_weight", "bitmap_scan_weight")


def _one_read_path(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (its family tables split into ``data["sections"]``) with the read path's weights in ``[read_path]``:
    a policy written before it set them in a family's own table (the readahead and concurrency families'); they
    are moved, and must agree — one read path, one workload."""
    tables = data.get("sections") or {}
    legacy = {t: {k: v[k] for k in WEIGHTS if k in v} for t, v in tables.items() if isinstance(v, dict)}
    legacy = {t: w for t, w in legacy.items() if w}
    if not legacy or "legacy_read_path" in data:
        return data
    named = "] and [".join(legacy)
    if "read_path" in data:
        raise ValueError(f"the read path's weights are set in [read_path] and in [{named}]: keep them in "
                         "[read_path] only")
    merged = [{**Mix().model_dump(), **w} for w in legacy.values()]
    if any(m != merged[0] for m in merged[1:]):
        raise ValueError(f"[{named}] give the read path different weights; one workload serves both families now: "
                         "set seq_scan_weight and bitmap_scan_weight once, in [read_path]")
    out = {**data, "sections": {t: ({k: x for k, x in v.items() if k not in WEIGHTS} if t in legacy else v)
                                for t, v in tables.items()}}
    out["read_path"] = next(iter(legacy.values()))
    out["legacy_read_path"] = tuple(legacy)
    return out


def find_policy(name: str, *, config_dir: Path | None = None) -> Path:
    """Locate a policy file by name or path."""
    if "/" in name or name.endswith(".toml"):
        path = Path(name)
        if config_dir is not None and not path.is_absolute():
            path = config_dir / path
        return path
    dirs = []
    if config_dir is not None:
        dirs.append(config_dir / "policies")
    if os.environ.get("TUNER_POLICY_DIR"):
        dirs.append(Path(os.environ["TUNER_POLICY_DIR"]))
    dirs.append(SHIPPED_POLICY_DIR)
    for d in dirs:
        candidate = d / f"{name}.toml"
        if candidate.is_file():
            return candidate
    available = sorted(p.stem for d in dirs if d.is_dir() for p in d.glob("*.toml"))
    raise ConfigError(
        f"no policy named '{name}'",
        hint=f"available: {', '.join(available) or 'none found'}; or give a path to a policy file",
    )


def load_policy(name: str, *, config_dir: Path | None = None) -> Policy:
    path = find_policy(name, config_dir=config_dir)
    data = read_toml(path)
    try:
        policy = Policy(**data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}", hint=exc.hint) from None
    except ValidationError as exc:
        raise _describe(exc, str(path)) from None
    for key in deprecated_keys(policy):
        log.warning("policy.deprecated_key", policy=str(path), key=key, hint=DEPRECATED[key])
    return policy


def deprecated_keys(policy: Policy) -> list[str]:
    """The keys of :data:`DEPRECATED` that ``policy`` sets."""
    found = {"[policy] storage_class": policy.policy.storage_class is not None,
             "[objective]": policy.objective is not None,
             "[readahead]/[concurrency] seq_scan_weight, bitmap_scan_weight": bool(policy.legacy_read_path)}
    return [key for key, present in found.items() if present]
