"""What every command shares: the help texts, one sentence and an exit status for every bad input, the store."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from tuner import log as tlog
from tuner.settings.config import Config
from tuner.settings.config_load import load_config
from tuner.emit.terminal import COLOR_CHOICES, Terminal, detect
from tuner.errors import ConfigError, TunerError
from tuner.report.validate import check
from tuner.store import open_store, store_location, target_history  # noqa: F401 (the commands import it from here)


# Every help text here is written for an 80-column terminal: click indents it by 2, so a line is at most 78
# characters (tests/unit/test_cli_help.py checks every command at several widths).
EXIT_TEXT = """\b
Exit status:
  0  done, also when the decision is "keep what you have"
  1  unexpected failure: the target unreachable, a probe setup failed, a bug
  2  bad input: configuration, policy or command-line value
  3  refused by the safety interlock before anything changed, or the server
     stopped being what it cleared mid-session (a standby promoted, the
     marker removed): stopped, and what tuner changed was put back
  4  nothing could be measured: a family failed (the report says why)
  129, 130, 143  stopped by SIGHUP, Ctrl-C or SIGTERM; everything put back"""

# For `tuner --help`: each command's own help lists the statuses it uses.
EXIT_SUMMARY = """\b
Exit status: 0 done; 1 unexpected failure; 2 bad input; 3 refused by the
  safety interlock; 4 nothing could be measured; 129, 130, 143 stopped by a
  signal. Each command's --help says which it uses and when."""

# For the commands that only read the store (history, show, diff, export, prune).
STORE_EXIT_TEXT = """\b
Exit status:
  0  done
  1  unexpected failure (a bug)
  2  bad input: configuration, an option, an unknown session; a store that
     cannot be reached or read (damaged, or written by a newer tuner); a
     report tuner could not have written; a directory that cannot be
     written"""

# What a configuration file, the environment and the options are, and how a connection string is read: for the
# commands that read the whole configuration and connect (recommend, restore, daemon, config validate).
CONFIG_TEXT = """\b
Configuration (later wins): tuner.toml (./tuner.toml, or --config PATH)
  < TUNER_SECTION__KEY environment < options, e.g. TUNER_SANDBOX__SCALE=10.
  As root, ./tuner.toml is read only when root owns it and nobody else
  can write it. Every number has bounds, e.g. --seed 0..4294967295;
  inf and nan are refused, and an out-of-range value names its source.
Connection: read by libpq itself: a DSN or postgresql:// URI, a service,
  PG* variables, ~/.pgpass. A keyword asyncpg cannot honour (keepalives=1,
  require_auth ...) is refused, not ignored. Passwords never appear in
  logs, reports, errors or `config validate --print`."""

# The store's readers need only where the store is: the rest of the configuration is not theirs.
STORE_CONFIG_TEXT = """\b
Configuration: only [store] and [tuner] state_dir are read — from
  tuner.toml (./tuner.toml, or --config PATH) < TUNER_* environment
  < options; 'tuner config validate --help' says how they are read."""


CONFIG_HELP = ("Configuration file (default: ./tuner.toml if present — as root, only if root owns it and only root "
               "can write it).")


COLOR_OPTION = click.option(
    "--color", type=click.Choice(COLOR_CHOICES), default="auto", metavar="WHEN",
    help="Colour the table's decisions: auto (default: on a terminal, unless NO_COLOR is set; FORCE_COLOR "
         "colours a pipe too), always, never. Never JSON, SQL or files.")


def terminal(color: str) -> Terminal:
    """Where stdout goes: its width (COLUMNS, else the terminal's, else 120) and whether it takes colour."""
    return detect(color, sys.stdout)


def echo_report(text: str, term: Terminal) -> None:
    """Print a report: click strips colour codes from anything but a terminal, so a colour decided on (--color
    always, FORCE_COLOR) is passed on explicitly."""
    click.echo(text, nl=False, color=True if term.color else None)


def require_target(cfg: Config, *, sandbox: bool) -> None:
    """A target to connect to: --sandbox, a DSN, or libpq's own PG* variables; else one sentence (exit 2)."""
    if not sandbox and not cfg.target.dsn:
        if not any(k in os.environ for k in ("PGHOST", "PGSERVICE", "PGDATABASE", "PGPORT")):
            raise ConfigError(
                "no target: give --dsn, set [target] dsn in tuner.toml, set PGHOST, or use --sandbox",
                hint="tuner recommend --sandbox tries it on a throwaway PostgreSQL",
            )


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


class Sectioned(click.Command):
    """A command whose options are listed under headings, as a man page groups them: ``sections`` is (heading,
    option names) in order; options in no section (--help among them) follow under "Other options"."""

    def __init__(self, *args: Any, sections: Sequence[tuple[str, Sequence[str]]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sections = sections

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = {p.name: p.get_help_record(ctx) for p in self.get_params(ctx)}
        placed = {name for _, names in self.sections for name in names}
        for heading, names in (*self.sections, ("Other options", [n for n in records if n not in placed])):
            rows = [r for n in names if (r := records.get(n)) is not None]
            if rows:
                with formatter.section(heading):
                    formatter.write_dl(rows)


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
The store: tuner.db (SQLite) in the state directory — /var/lib/tuner as
  root, else ~/.local/state/tuner — or [store] path; or a PostgreSQL
  database shared by a fleet: [store] url (tables in its schema 'tuner').
  A damaged store, or one written by a newer tuner, is refused with one
  sentence (exit 2) and never changed."""


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
        async with open_store(cfg, check=check) as store:
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
