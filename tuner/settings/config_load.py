"""Loading the configuration: ``tuner.toml`` < ``TUNER_*`` environment < command line, into :class:`tuner.settings.config.Config`.

Environment variables use a double underscore between section and key, e.g. ``TUNER_TARGET__DSN`` or
``TUNER_SANDBOX__SCALE=10``. Values are read as TOML literals when they parse as one (numbers, booleans,
``["a", "b"]``) and as plain strings otherwise. As root, ``./tuner.toml`` is read implicitly only when root owns it
and nobody else can write it: a ``tuner restore`` run as root in someone else's directory must not run that
someone's ``helper_command``.

Family and output format names are checked here, against the registries that own them: they live above the
configuration's models (they import them), so asking them in :mod:`tuner.settings.config` would make the bottom layer import
upwards. A name they do not know is refused with the same one sentence (exit 2) as any other bad value.
"""

from __future__ import annotations

import os
import re
import sys
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tuner.settings.config import Config, _describe, _origin
from tuner.emit import FORMATS
from tuner.errors import ConfigError
from tuner.families import REGISTRY
from tuner.settings.tomlfile import Untrusted, read_toml

ENV_PREFIX = "TUNER_"
DEFAULT_CONFIG_NAME = "tuner.toml"
_ENV_PART = re.compile(r"[a-z][a-z0-9_]*")


def known_names() -> dict[str, tuple[str, ...]]:
    """The registries' names by kind: the validation context :mod:`tuner.settings.config`'s models check names against."""
    return {"family": REGISTRY.names(), "format": FORMATS}


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
    except (ValueError, RecursionError):  # not a TOML literal (TOMLDecodeError is a ValueError): a plain string
        return raw


def _env_layers(environ: Mapping[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """Each ``TUNER_SECTION__KEY`` variable as (its name, ``{section: {key: value}}``)."""
    layers = []
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        path = name[len(ENV_PREFIX) :].lower().split("__")
        if len(path) != 2 or not all(_ENV_PART.fullmatch(p) for p in path):
            raise ConfigError(
                f"the environment variable {name} does not name a setting: tuner's variables are "
                "TUNER_SECTION__KEY, with one double underscore (e.g. TUNER_TARGET__DSN)",
                hint=f"unset {name}, or rename it",
            )
        section, key = path
        layers.append((name, {section: {key: _parse_env_value(raw)}}))
    return layers


def env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """``TUNER_SECTION__KEY=value`` variables as a nested dict."""
    out: dict[str, Any] = {}
    for _name, layer in _env_layers(environ):
        out = _deep_merge(out, layer)
    return out



def _implicit_config(warn: Callable[[str], None]) -> tuple[Path | None, dict[str, Any]]:
    """``./tuner.toml`` if it exists and — as root — is root's own (not a link, not writable by others)."""
    path = Path(DEFAULT_CONFIG_NAME)
    if os.geteuid() != 0:
        return (path, read_toml(path)) if path.is_file() else (None, {})
    if not path.is_file() and not path.is_symlink():
        return None, {}
    try:
        return path, read_toml(path, as_root_implicitly=True)
    except Untrusted as why:
        warn(f"tuner: warning: ignored ./tuner.toml: {why}; as root, tuner reads it implicitly only when root owns "
             "it and nobody else can write it (to use it anyway: --config ./tuner.toml)")
        return None, {}


def load_config(
    path: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    warn: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> Config:
    """Build the effective configuration.

    ``path=None`` reads ``./tuner.toml`` when it exists (as root: only root's own, see the module docstring) and
    uses defaults otherwise. ``overrides`` come from the command line, shaped like the file
    (``{"target": {"dsn": ...}}``). Family and format names are checked against the registries (the validation
    context of :mod:`tuner.settings.config`'s models), and a table without ``families`` gets every registered family.
    """
    if path is None:
        path, data = _implicit_config(warn)
    else:
        data = read_toml(path)
    layers: list[tuple[str, Any]] = [(str(path) if path else "defaults", data)]
    for name, layer in _env_layers(os.environ if environ is None else environ):
        layers.append((name, layer))
        data = _deep_merge(data, layer)
    if overrides:
        layers.append(("the command line", overrides))
        data = _deep_merge(data, overrides)
    if "source" in data:  # a field of Config, but tuner's own record of the file, not a setting
        raise ConfigError(f"{_origin(layers, ('source',))}: source: unknown key (a typo?)")
    try:
        cfg = Config.model_validate(data, context=known_names())
    except ValidationError as exc:
        raise _describe(exc, layers) from None
    except TypeError as exc:  # e.g. a section given as a scalar
        raise ConfigError(f"{layers[-1][0]}: {exc}") from None
    return cfg.model_copy(update={"source": path})
