"""Configuration: ``tuner.toml`` < ``TUNER_*`` environment < command line, validated by pydantic.

Unknown keys are errors (a typo must not pass silently). Every validation problem becomes one
:class:`ConfigError` sentence that names the file, the key and the problem.

Environment variables use a double underscore between section and key, e.g. ``TUNER_TARGET__DSN`` or
``TUNER_SANDBOX__SCALE=10``. Values are read as TOML literals when they parse as one (numbers, booleans,
``["a", "b"]``) and as plain strings otherwise.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tuner.errors import ConfigError

ENV_PREFIX = "TUNER_"
DEFAULT_CONFIG_NAME = "tuner.toml"



def _known_families() -> tuple[str, ...]:
    from tuner.families import REGISTRY

    return REGISTRY.names()


def _known_formats() -> tuple[str, ...]:
    from tuner.emit import FORMATS

    return FORMATS


def _one_of(value: str, known: tuple[str, ...], what: str) -> str:
    if value not in known:
        raise ValueError(f"unknown {what} {value!r} (known: {', '.join(known)})")
    return value


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TargetConfig(_Section):
    dsn: str | None = Field(
        default=None,
        description="libpq connection string or URI; when unset, PG* environment variables and defaults apply",
    )
    connect_timeout_s: float = Field(default=10.0, gt=0)
    restart_command: str | None = Field(
        default=None,
        description="shell command that restarts the staging server, used to empty shared buffers before cold probes",
    )


class TunerSection(_Section):
    policy: str = Field(default="default", description="policy name (policies/NAME.toml) or path to a policy file")
    families: tuple[str, ...] = Field(default_factory=_known_families,
                                      description="knob families to tune (default: every registered family)")
    seed: int = Field(default=20261202, description="seed for the optimiser and the probe order")
    state_dir: Path | None = Field(
        default=None,
        description="the change journal's directory; unset: /var/lib/tuner as root, else ~/.local/state/tuner",
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    @field_validator("families")
    @classmethod
    def _registered(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_one_of(v, _known_families(), "family") for v in value)


class WorkloadConfig(_Section):
    queries: tuple[str, ...] = Field(
        default=(),
        description="your own probe queries (SELECTs that plan as bitmap heap scans); generated when empty",
    )
    relations: int = Field(default=1, ge=1, le=16, description="how many of the largest relations to probe")
    pages_fraction: float = Field(
        default=0.12, gt=0, le=1, description="share of a relation's pages a generated bitmap scan should visit"
    )


class ReadaheadConfig(_Section):
    helper_command: str | None = Field(
        default=None,
        description="privileged command that writes a sysfs attribute when tuner is not root; "
        "{path}, {device} and {value} are replaced (shell-quoted)",
    )
    devices: tuple[str, ...] = Field(
        default=(),
        description="only tune these devices (/dev/NAME); empty: every device under the target's directories",
    )


class SandboxConfig(_Section):
    scale: int = Field(default=50, ge=1, le=10000, description="pgbench-style scale: 100,000 accounts per unit")
    bin_dir: Path | None = Field(default=None, description="PostgreSQL server binaries; found automatically when unset")
    base_dir: Path = Field(default=Path("/var/tmp"), description="where sandbox clusters are created (not tmpfs)")
    keep: bool = Field(default=False, description="leave the sandbox on disk after the run (for debugging)")
    disk: Literal["auto", "loop", "host"] = Field(
        default="auto",
        description="auto: a loop device of the sandbox's own when root (its readahead can be tuned), else base_dir's disk",
    )


class OutputConfig(_Section):
    format: str = Field(default="table", description="what `tuner recommend` prints: table, json or sql")
    directory: Path | None = None

    @field_validator("format")
    @classmethod
    def _known(cls, value: str) -> str:
        return _one_of(value, _known_formats(), "format")


class Config(_Section):
    target: TargetConfig = TargetConfig()
    tuner: TunerSection = TunerSection()
    workload: WorkloadConfig = WorkloadConfig()
    readahead: ReadaheadConfig = ReadaheadConfig()
    sandbox: SandboxConfig = SandboxConfig()
    output: OutputConfig = OutputConfig()

    source: Path | None = Field(default=None, exclude=True, description="file the config came from")


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _parse_env_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """``TUNER_SECTION__KEY=value`` variables as a nested dict."""
    out: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = _parse_env_value(raw)
    return out


def _describe(err: ValidationError, origin: str) -> ConfigError:
    first = err.errors()[0]
    loc = [str(p) for p in first["loc"]]
    section, key = (loc[0], ".".join(loc[1:])) if len(loc) > 1 else (None, loc[0] if loc else "?")
    where = f"[{section}] {key}" if section else key
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key (a typo?)"
    more = len(err.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return ConfigError(
        f"{origin}: {where}: {msg}{suffix}",
        hint="see the commented sample tuner.toml, or run 'tuner config validate --print'",
    )


def read_toml(path: Path) -> dict[str, Any]:
    """Read a TOML file, turning every failure into one ConfigError sentence."""
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file", hint="pass --config PATH, or create tuner.toml") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a TOML file") from None
    except PermissionError:
        raise ConfigError(f"{path}: permission denied") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}", hint="check quoting and brackets near that line") from None


def load_config(
    path: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Build the effective configuration.

    ``path=None`` reads ``./tuner.toml`` when it exists and uses defaults otherwise. ``overrides`` come
    from the command line, shaped like the file (``{"target": {"dsn": ...}}``).
    """
    data: dict[str, Any] = {}
    origin = "defaults"
    if path is None and Path(DEFAULT_CONFIG_NAME).is_file():
        path = Path(DEFAULT_CONFIG_NAME)
    if path is not None:
        data = read_toml(path)
        origin = str(path)
    env = env_overrides(os.environ if environ is None else environ)
    if env:
        data = _deep_merge(data, env)
        origin = f"{origin} + TUNER_* environment"
    if overrides:
        data = _deep_merge(data, overrides)
    try:
        cfg = Config(**data)
    except ValidationError as exc:
        raise _describe(exc, origin) from None
    except TypeError as exc:  # e.g. a section given as a scalar
        raise ConfigError(f"{origin}: {exc}") from None
    return cfg.model_copy(update={"source": path})


def state_dir(cfg: Config) -> Path:
    """Where the journal lives: ``[tuner] state_dir``, else the default for this user."""
    if cfg.tuner.state_dir is None:
        return default_state_dir()
    return resolve_path(cfg, cfg.tuner.state_dir)


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
