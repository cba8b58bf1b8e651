"""What every command shares: the help texts, one sentence and an exit status for every bad input, the store."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import click

from tuner import log as tlog
from tuner.config import Config
from tuner.configured import load_config
from tuner.errors import ConfigError, TunerError
from tuner.files import atomic_write
from tuner.store import open_store, store_location, target_history


EXIT_TEXT = """\b
Exit status:
  0  done — also when the decision is "keep what you have"
  1  unexpected failure (the target could not be reached, a probe setup failed, a bug)
  2  bad input: configuration, policy or command-line value
  3  refused by the safety interlock (a primary, or a writable server without the staging marker),
     before anything changed — or the server stopped being what it cleared mid-session (a standby
     promoted, the marker removed): the session stopped, wrote nothing more to it and put back what it could
  4  nothing could be measured: no recommendation, and a family failed (the report says why and how to fix it)
  129, 130, 143  stopped by SIGHUP, Ctrl-C or SIGTERM; everything tuner changed was put back"""

CONFIG_TEXT = """\b
Configuration (later wins):
  tuner.toml (./tuner.toml, or --config PATH)  <  TUNER_SECTION__KEY environment  <  options
  e.g. TUNER_TARGET__DSN='host=staging-db dbname=app'  TUNER_SANDBOX__SCALE=10
  As root, ./tuner.toml is read only when root owns it and nobody else can write it (else a
  warning says it was ignored); pass --config ./tuner.toml to use it anyway.
  Every number has bounds, e.g. --seed 0..4294967295, [target] connect_timeout_s up to 3600;
  inf and nan are refused. An out-of-range value names its source and the bound.
Connection: libpq conventions — a DSN or postgresql:// URI, PGHOST/PGPORT/PGUSER/PGDATABASE/
PGPASSWORD, ~/.pgpass. Keywords asyncpg cannot honour (keepalives, hostaddr, require_auth …)
are refused, not ignored; options='-c name=value' is sent as libpq sends it. Passwords never
appear in logs, reports, errors or `config validate --print`."""


CONFIG_HELP = "Configuration file (default: ./tuner.toml if present — as root, only if root owns it and only root can write it)."


def fail(err: TunerError) -> None:
    click.echo(f"tuner: error: {err}", err=True)
    if err.hint:
        click.echo(f"hint: {err.hint}", err=True)
    sys.exit(err.exit_code)


def usage(err: click.UsageError) -> None:
    """A bad option or argument, in the format of every other bad input: one sentence and a hint, exit 2."""
    no_args = getattr(click.exceptions, "NoArgsIsHelpError", None)
    if no_args is not None and isinstance(err, no_args):
        raise err
    where = err.ctx.command_path if err.ctx else "tuner"
    fail(ConfigError(err.format_message().rstrip("."), hint=f"see '{where} --help'"))


class Group(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as err:
            usage(err)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TunerError as err:
            fail(err)
        except click.UsageError as err:
            usage(err)
        except KeyboardInterrupt:
            click.echo("tuner: interrupted; everything tuner started was stopped and removed", err=True)
            sys.exit(130)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except Exception as exc:  # a bug: one line for the user, the traceback only when asked for
            if "--log-level" in sys.argv and "debug" in sys.argv:
                raise
            click.echo(f"tuner: unexpected error: {type(exc).__name__}: {exc}", err=True)
            click.echo("hint: this is a bug in tuner; rerun with --log-level debug for the traceback", err=True)
            sys.exit(1)



STORE_TEXT = """\b
The store: tuner.db (SQLite) in the state directory — /var/lib/tuner as root, else
~/.local/state/tuner — or [store] path; or a PostgreSQL database shared by a fleet: [store] url
(tables in its schema 'tuner'). A damaged store, or one written by a newer tuner, is refused with
one sentence (exit 2) and never changed."""


def store_config(config_path: Path | None, state_dir: Path | None) -> Config:
    overrides = {"tuner": {"state_dir": str(state_dir)}} if state_dir else None
    cfg = load_config(config_path, overrides=overrides)
    tlog.configure(cfg.tuner.log_level)
    return cfg


def with_store(cfg: Config, work: Any) -> Any:
    """Run ``work(store)`` against the configured store; an absent SQLite store is not created by a reader."""
    if not cfg.store.enabled:
        raise ConfigError("the store is turned off ([store] enabled = false)",
                          hint="set [store] enabled = true (or TUNER_STORE__ENABLED=true)")
    if not cfg.store.url and not Path(store_location(cfg)).exists():
        raise ConfigError(f"no store at {store_location(cfg)} yet",
                          hint="run 'tuner recommend' first (it stores every session), or give --state-dir or "
                               "[store] path/url")

    async def go() -> Any:
        async with open_store(cfg) as store:
            return await work(store)

    return asyncio.run(go())


STORE_OPTIONS = [
    click.option("--config", "config_path", type=click.Path(path_type=Path), help=CONFIG_HELP),
    click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False),
                 help="The state directory whose tuner.db to read (overrides [tuner] state_dir)."),
]


def with_store_options(fn: Any) -> Any:
    for option in reversed(STORE_OPTIONS):
        fn = option(fn)
    return fn



def write_files(files: dict[str, str], directory: Path) -> list[Path]:
    """Each file into ``directory`` atomically; a directory that cannot be written is one sentence (exit 2)."""
    written: list[Path] = []
    for name, body in files.items():
        path = directory / name
        try:
            atomic_write(path, body)
        except OSError as exc:
            done = f" ({len(written)} of {len(files)} files were written before it)" if written else ""
            raise ConfigError(f"cannot write {path}: {exc.strerror or exc}{done}",
                              hint="give --output a directory you can write (it is created if missing)") from None
        written.append(path)
    return written
