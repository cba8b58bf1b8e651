"""``tuner config``: inspecting and checking the configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tuner import redact
from tuner.settings import tomlwriter
from tuner.cli.common import CONFIG_HELP, CONFIG_TEXT
from tuner.settings.config_load import load_config
from tuner.settings.policy import load_policy


@click.group()
def config() -> None:
    """Inspect and check the configuration."""


@config.command("validate")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help=CONFIG_HELP)
@click.option("--print", "show", is_flag=True, help="Print the effective configuration (file < environment < defaults) as TOML, passwords as ***.")
def validate(config_path: Path | None, show: bool) -> None:
    """Check tuner.toml and the policy it names; exit 2 with one sentence if anything is wrong."""
    cfg = load_config(config_path)
    policy = load_policy(cfg.tuner.policy, config_dir=cfg.source.parent if cfg.source else None)
    if show:
        data = _redacted(cfg.model_dump(mode="json", exclude={"source"}, by_alias=True))
        click.echo(tomlwriter.dumps(data), nl=False)
    where = str(cfg.source) if cfg.source else "defaults (no tuner.toml read)"
    click.echo(f"tuner: configuration OK ({where}; policy {policy.policy.name})", err=True)


def _redacted(data: Any) -> Any:
    """Every string in the configuration with its secrets hidden: DSNs, store URLs and commands alike (a command
    may carry PGPASSWORD=…, a password= DSN or a URI with a password), wherever they sit, [[daemon.targets]] too."""
    if isinstance(data, dict):
        return {k: _redacted(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_redacted(v) for v in data]
    return redact.text(data) if isinstance(data, str) else data


VALIDATE_EXIT_TEXT = """\b
Exit status:
  0  the configuration and its policy are valid
  2  they are not: one sentence names the first problem and its source"""

validate.epilog = CONFIG_TEXT + "\n\n" + VALIDATE_EXIT_TEXT
config.epilog = """\b
Exit status: as each subcommand's --help says (validate: 0 valid, 2 not)."""
