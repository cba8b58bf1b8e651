"""Configuration: the models of ``tuner.toml``'s tables, validated by pydantic (loaded by :mod:`tuner.settings.config_load`).

Unknown keys are errors (a typo must not pass silently). Every validation problem becomes one
:class:`ConfigError` sentence that names the file, the key and the problem.

Every number has bounds (no ``inf``, no ``nan``), and an error names where the bad value came from (the file, the
environment variable, the command line), never the value itself. Names that registries above this layer own
(families, output formats) are checked against the validation context the loader passes.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, GetCoreSchemaHandler, ValidationError,
                      ValidationInfo, field_validator, model_validator)
from pydantic_core import core_schema

from tuner.sandbox.device.profile import LOCAL, SYNTAX, DeviceField
from tuner.settings.durations import Duration
from tuner.errors import ConfigError
from tuner.probes import own_queries
from tuner.settings.placeholders import HelperCommand
from tuner.target.connection import check_dsn
from tuner.settings.schedule import Schedule, Windows, parse_windows

SEED_MAX = 2**32 - 1  # numpy's seeds are 0 .. 2**32 - 1


def _one_of(value: str, info: ValidationInfo, kind: str) -> str:
    """``value`` if the registry of ``kind`` knows it. The registries (families, output formats) live above this
    layer: whoever loads the configuration passes their names as the validation context (:func:`tuner.settings.config_load.load_config`);
    without them, names are not checked here."""
    known = (info.context or {}).get(kind)
    if known is not None and value not in known:
        raise ValueError(f"unknown {kind} {value!r} (known: {', '.join(known)})")
    return value


def _no_nul(value: Any) -> Any:
    items = value if isinstance(value, (list, tuple)) else [value]
    if any(isinstance(v, str) and "\x00" in v for v in items):
        raise ValueError("contains a NUL character")
    return value


class Section(BaseModel):
    """A table of a configuration or policy file: unknown keys are errors, numbers finite, strings without NUL."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return _no_nul(value)


def _registered(value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
    return tuple(_one_of(v, info, "family") for v in value)


FamilyNames = Annotated[tuple[str, ...], AfterValidator(_registered)]


class FamiliesSection(Section):
    """A table with a ``families`` key (``[tuner]``, ``[[daemon.targets]]``): without it, every registered family
    is tuned (the validation context's list; none without one)."""

    @model_validator(mode="before")
    @classmethod
    def _every_family(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, Mapping) and "families" not in data:
            return {**data, "families": tuple((info.context or {}).get("family", ()))}
        return data


def _directory_path(value: Path) -> Path:
    """An absolute path whose nearest existing part is a directory (relative ones are checked once resolved)."""
    if value.is_absolute():
        problem = unusable_directory(value)
        if problem:
            raise ValueError(problem)
    return value


def unusable_directory(path: Path) -> str | None:
    """Why ``path`` cannot be (or become, by mkdir) a directory, or None."""
    for p in (path, *path.parents):
        try:
            st = p.stat()
        except (FileNotFoundError, NotADirectoryError):  # not there (yet), or under a file: look further up
            continue
        except OSError as exc:
            return f"{p} cannot be used: {exc.strerror or exc}"
        return None if stat.S_ISDIR(st.st_mode) else f"{p} is a file, not a directory"
    return None


DirPath = Annotated[Path, AfterValidator(_directory_path)]


class TargetConfig(Section):
    dsn: str | None = Field(
        default=None,
        description="libpq connection string or URI; when unset, PG* environment variables and defaults apply",
    )
    connect_timeout_s: float = Field(default=10.0, gt=0, le=3600, description="seconds, at most 3600")
    restart_command: str | None = Field(
        default=None,
        description="shell command that restarts the staging server, used to empty shared buffers before cold probes",
    )

    @field_validator("dsn")
    @classmethod
    def _usable(cls, value: str | None) -> str | None:
        try:
            check_dsn(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return value


class TunerSection(FamiliesSection):
    policy: str = Field(default="default", description="policy name (policies/NAME.toml) or path to a policy file")
    families: FamilyNames = Field(default=(), description="knob families to tune (default: every registered family)")
    seed: int = Field(default=20261202, ge=0, le=SEED_MAX,
                      description=f"seed for the optimiser and the probe order, 0 to {SEED_MAX}")
    state_dir: DirPath | None = Field(
        default=None,
        description="the change journal's directory; unset: /var/lib/tuner as root, else ~/.local/state/tuner",
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"


class WorkloadConfig(Section):
    # `from` is a Python keyword: the field is queries_from, the key in tuner.toml and TUNER_WORKLOAD__FROM is `from`.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, populate_by_name=True)

    queries_from: Literal["generated", "pg_stat_statements"] = Field(
        default="generated", alias="from",
        description="where the probe queries come from: generated from the target's statistics (or `queries`), "
        "or the statements that read the most in pg_stat_statements (`tuner workload show` previews them)",
    )
    queries: tuple[str, ...] = Field(
        default=(),
        description="your own probe queries (SELECTs that plan as bitmap heap scans); generated when empty. An entry "
        "may begin with SET name = value; statements of planner settings (enable_*, random_page_cost, "
        "seq_page_cost, cpu_*_cost, effective_cache_size, work_mem, jit, max_parallel_workers_per_gather) that "
        "apply to that query alone",
    )

    @field_validator("queries")
    @classmethod
    def _own_queries(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for i, entry in enumerate(value):
            own_queries.parse(entry, i + 1)  # QueryRefused (a ValueError): one sentence and its hint
        return value
    statements: int = Field(
        default=5, ge=1, le=50, description="from pg_stat_statements: at most this many statements are replayed")
    share: float = Field(
        default=0.8, gt=0, le=1,
        description="from pg_stat_statements: stop adding statements once they cover this share of the read I/O")
    stats_dsn: str | None = Field(
        default=None,
        description="from pg_stat_statements: read it on this server (e.g. the primary, read-only) instead of "
        "the target; the statements are replayed on the target either way")

    @field_validator("stats_dsn")
    @classmethod
    def _usable(cls, value: str | None) -> str | None:
        return TargetConfig._usable(value)
    relations: int = Field(default=1, ge=1, le=16, description="how many of the largest relations to probe")
    pages_fraction: float = Field(
        default=0.12, gt=0, le=1, description="share of a relation's pages a generated bitmap scan should visit"
    )


class ReadaheadConfig(Section):
    helper_command: HelperCommand | None = Field(
        default=None, description="privileged command that writes a sysfs attribute when tuner is not root; "
        "{path}, {device} and {value} are replaced (shell-quoted)",
    )
    devices: tuple[str, ...] = Field(
        default=(),
        description="only tune these devices (/dev/NAME); empty: every device under the target's directories",
    )


class SandboxConfig(Section):
    scale: int = Field(default=50, ge=1, le=10000, description="pgbench-style scale: 100,000 accounts per unit")
    bin_dir: Path | None = Field(default=None, description="PostgreSQL server binaries; found automatically when unset")
    pg_version: int | None = Field(default=None, description="the sandbox's PostgreSQL major (15-19), built on first use; unset: the host's")
    base_dir: DirPath = Field(default=Path("/var/tmp"), description="where sandbox clusters are created (not tmpfs)")
    keep: bool = Field(default=False, description="leave the sandbox on disk after the run (for debugging)")
    disk: Literal["auto", "loop", "host"] = Field(default="auto", description="auto: a loop device of the sandbox's own when root (its readahead can be tuned), else base_dir's disk")
    device: DeviceField = Field(default=LOCAL, description=f"the disk its loop device emulates: {SYNTAX}")


class OutputConfig(Section):
    format: str = Field(default="table", description="what `tuner recommend` prints: any of `tuner recommend --help`'s --format choices")
    directory: DirPath | None = None

    @field_validator("format")
    @classmethod
    def _known(cls, value: str, info: ValidationInfo) -> str:
        return _one_of(value, info, "format")


class StoreConfig(Section):
    enabled: bool = Field(default=True, description="store every session (false: like --no-store)")
    path: Path | None = Field(
        default=None, description="the SQLite store (default: tuner.db in the state directory)")
    url: str | None = Field(
        default=None,
        description="a PostgreSQL database for a fleet's shared store (libpq DSN or URI); overrides path")
    warm_start: bool = Field(
        default=True,
        description="start a search from the latest stored session on a matching target (false: always cold)")

    @field_validator("url")
    @classmethod
    def _usable(cls, value: str | None) -> str | None:
        return TargetConfig._usable(value)

    @field_validator("path")
    @classmethod
    def _file(cls, value: Path | None) -> Path | None:
        if value is not None and value.is_absolute():
            problem = unusable_directory(value.parent)
            if problem:
                raise ValueError(problem)
            if value.is_dir():
                raise ValueError(f"{value} is a directory; give the store's file name")
        return value


class DaemonTarget(FamiliesSection):
    """One target of the daemon beyond (or instead of) ``[target]``."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,62}$",
                      description="the target's name in the API, /metrics and logs (lower case, digits, . _ -)")
    dsn: str | None = Field(default=None, description="as [target] dsn")
    restart_command: str | None = Field(default=None, description="as [target] restart_command")
    families: FamilyNames = Field(default=(), description="families to tune on it (default: every registered family)")
    policy: str | None = Field(default=None, description="policy for this target (default: [tuner] policy)")

    @field_validator("dsn")
    @classmethod
    def _usable(cls, value: str | None) -> str | None:
        return TargetConfig._usable(value)


@dataclass(frozen=True)
class _ParsedFrom:
    """An ``Annotated`` marker for a value parsed once, here at the edge: pydantic checks the TOML value as ``raw``
    (so a wrong type gets pydantic's own sentence), ``parse`` turns it into the typed value (its ``ValueError``
    becomes the key's sentence), and a dump gives back ``text`` of it, so ``tuner config validate --print``
    shows what the user wrote. An already typed value (a default) passes as it is."""

    raw: Any
    parse: Callable[[Any], Any]
    typed: type
    text: Callable[[Any], Any]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        def validate(value: Any, check_raw: core_schema.ValidatorFunctionWrapHandler) -> Any:
            return value if isinstance(value, self.typed) else self.parse(check_raw(value))

        return core_schema.no_info_wrap_validator_function(
            validate, handler.generate_schema(self.raw),
            serialization=core_schema.plain_serializer_function_ser_schema(self.text))


def _schedule(text: str | None) -> Schedule | None:
    if text is None or not text.strip():
        return None
    schedule = Schedule(text)
    schedule.trigger  # parsed now, to refuse a bad line here; the trigger is kept for the scheduler
    return schedule


EveryDuration = Annotated[Duration, _ParsedFrom(str, Duration.parse, Duration, str)]
CrontabLine = Annotated[Schedule | None, _ParsedFrom(str | None, _schedule, Schedule,
                                                     lambda s: None if s is None else s.text)]
WindowList = Annotated[Windows, _ParsedFrom(tuple[str, ...], parse_windows, Windows, lambda w: list(w.texts))]


class DaemonConfig(Section):
    """``tuner daemon``: when it probes, what it watches, where it answers."""

    token_file: Path | None = Field(
        default=None,
        description="file holding the bearer token: needed for POST, and for every endpoint but /healthz off loopback")
    listen: str = Field(default="127.0.0.1:8187",
                        description="HTTP API address HOST:PORT (loopback by default; any other needs token_file)")
    schedule: CrontabLine = Field(default=Schedule("0 2 * * 6"),
                                  description="crontab (5 fields, local time) of full sessions; empty: none")
    windows: WindowList = Field(
        default=Windows(),
        description='when probing may run, e.g. ["Sat 01:00-05:00", "Mon-Fri 22:00-04:00"]; empty: any time')
    drift_check_every: EveryDuration = Field(default=Duration.parse("10m"),
                                             description="how often the target's fingerprint is checked")
    revalidate_every: EveryDuration = Field(default=Duration.parse("7d"),
                                            description="how often a stored recommendation is re-confirmed")
    targets: tuple[DaemonTarget, ...] = Field(default=(), description="more targets ([[daemon.targets]])")

    @field_validator("listen")
    @classmethod
    def _address(cls, value: str, info: ValidationInfo) -> str:
        host, _ = listen_address(value)
        if not is_loopback(host) and info.data.get("token_file") is None:
            raise ValueError(f"{value!r} is not a loopback address: set token_file too (every endpoint but "
                             "/healthz then needs its bearer token)")
        return value

    @field_validator("targets")
    @classmethod
    def _unique(cls, value: tuple[DaemonTarget, ...]) -> tuple[DaemonTarget, ...]:
        names = [t.name for t in value]
        if len(set(names)) != len(names):
            raise ValueError("two [[daemon.targets]] share a name")
        return value


def listen_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT``) as (host, port), or ValueError."""
    host, sep, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{value!r} is not HOST:PORT (e.g. 127.0.0.1:8187 or [::1]:8187)")
    return host, int(port)


def is_loopback(host: str) -> bool:
    import ipaddress

    if host.lower().rstrip(".") == "localhost":  # host names are case-insensitive (RFC 4343)
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Config(Section):
    target: TargetConfig = TargetConfig()
    # Validated even when absent, so that the registries' names (the validation context) fill in the families.
    tuner: TunerSection = Field(default_factory=dict, validate_default=True)  # type: ignore[arg-type]
    workload: WorkloadConfig = WorkloadConfig()
    readahead: ReadaheadConfig = ReadaheadConfig()
    sandbox: SandboxConfig = SandboxConfig()
    output: OutputConfig = OutputConfig()
    store: StoreConfig = StoreConfig()
    daemon: DaemonConfig = DaemonConfig()

    source: Path | None = Field(default=None, exclude=True, description="file the config came from")


def _holds(data: Any, loc: tuple[Any, ...]) -> bool:
    for part in loc:
        if isinstance(data, Mapping) and part in data:
            data = data[part]
        elif isinstance(data, (list, tuple)) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return False
    return True


def _origin(layers: list[tuple[str, Any]], loc: tuple[Any, ...]) -> str:
    """The name of the last layer that sets ``loc`` (the first layer's if none does)."""
    return next((name for name, data in reversed(layers) if _holds(data, loc)), layers[0][0])


def _describe(err: ValidationError, origin: str | list[tuple[str, Any]]) -> ConfigError:
    """One sentence for the first problem. ``origin``: where the data came from, or the layers it was merged
    from (later wins), of which the one that set the bad value is named."""
    first = err.errors()[0]
    if not isinstance(origin, str):
        origin = _origin(origin, first["loc"])
    loc = [str(p) for p in first["loc"]]
    section, key = (loc[0], ".".join(loc[1:])) if len(loc) > 1 else (None, loc[0] if loc else "?")
    where = f"[{section}] {key}" if section else key
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown key (a typo?)"
    more = len(err.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    refused = first.get("ctx", {}).get("error")
    return ConfigError(
        f"{origin}: {where}: {msg}{suffix}",
        hint=refused.hint if isinstance(refused, own_queries.QueryRefused)
        else "see the commented sample tuner.toml, or run 'tuner config validate --print'",
    )


def state_dir(cfg: Config) -> Path:
    """Where the journal lives: ``[tuner] state_dir``, else the default for this user."""
    path = default_state_dir() if cfg.tuner.state_dir is None else resolve_path(cfg, cfg.tuner.state_dir)
    problem = unusable_directory(path)
    if problem:
        raise ConfigError(f"the state directory {path} cannot be used: {problem}",
                          hint="set --state-dir or [tuner] state_dir to a directory")
    return path


def default_state_dir() -> Path:
    """``/var/lib/tuner`` for root (a system service), else ``$XDG_STATE_HOME/tuner`` (``~/.local/state/tuner``)."""
    if os.geteuid() == 0:
        return Path("/var/lib/tuner")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "tuner"


def resolve_path(cfg: Config, value: Path) -> Path:
    """Relative paths in a config file are relative to that file."""
    if value.is_absolute() or cfg.source is None:
        return value
    return cfg.source.parent / value
