"""``tuner restore`` and ``tuner prune``: putting back what a session left in the journal, and clearing old history
from the store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from tuner import log as tlog
from tuner.actuate import Journal, JournalError, SysfsWriter
from tuner.cli.common import (CONFIG_HELP, CONFIG_TEXT, STORE_CONFIG_TEXT, STORE_EXIT_TEXT, STORE_TEXT, store_config,
                              with_store, with_store_options)
from tuner.settings.config import Config
from tuner.settings.config import state_dir as configured_state_dir
from tuner.settings.config_load import load_config
from tuner.settings.durations import parse_duration
from tuner.errors import ConfigError, RefusedError


@click.command()
@click.option("--config", "config_path", type=click.Path(path_type=Path), help=CONFIG_HELP)
@click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False), help="Where the journal lives (overrides [tuner] state_dir).")
@click.option("--dsn", help="Staging server to restore ALTER SYSTEM entries on (default: the journal's DSN, without its password).")
@click.option("--force", is_flag=True, help="Restore even if the journal's owner looks alive (only when you know it is not).")
@click.option("--forget", metavar="ENTRY", help="Drop journal entry ENTRY (its number from 1, its device or setting name, or 'all') without writing it back.")
def restore(config_path: Path | None, state_dir: Path | None, dsn: str | None, force: bool, forget: str | None) -> None:
    """Put back everything a tuner session changed and did not restore (after a crash or SIGKILL).

    tuner writes every persistent change it makes (a block device's read_ahead_kb; a WAL setting
    written with ALTER SYSTEM on the staging clone) into a journal before making it, and restores it
    at the end of the session, on Ctrl-C and on SIGTERM.
    A session killed with SIGKILL (or a crash, or power loss) leaves the journal behind; the next
    `tuner recommend` restores it before it does anything else, and so does this command. After a
    reboot, kernel settings are back at their boot values already: such entries are dropped, not written.
    ALTER SYSTEM entries are written back only on a writable server marked tuner.role = 'staging' (a
    primary shares its system identifier and port with its clones); anything else is refused.

    Prints one line per entry (object, old value -> restored value) on stdout. An entry that cannot
    be put back stays in the journal, and the others are still put back. A journal tuner did not
    write (damaged, or naming anything but a block device's queue/read_ahead_kb or a WAL setting) is
    refused whole; look at it, put back by hand what it lists, then drop it with --forget.

    \b
    Examples:
      tuner restore                    the default state directory
      tuner restore --state-dir /srv/tuner
      tuner restore --forget 2         drop entry 2 (put back by hand)
      tuner restore --forget all       drop the whole journal, even damaged
      tuner restore --dsn 'host=staging1 dbname=app'
                                       where the journal's DSN needs more
    """
    overrides = {"tuner": {"state_dir": str(state_dir)}} if state_dir else None
    cfg = load_config(config_path, overrides=overrides)
    tlog.configure(cfg.tuner.log_level)
    directory = configured_state_dir(cfg)
    journal = Journal(directory, writer=_writer(cfg))
    if not journal.path.exists():
        click.echo(f"tuner: nothing to {'forget' if forget else 'restore'} (no journal in {directory})", err=True)
        return
    with journal.locked("restore"):
        if forget is not None:
            for line in journal.forget(forget):
                click.echo(f"forgotten without writing it: {line}")
            left = journal.listing()
            click.echo(f"tuner: {len(left)} journal entr{'y' if len(left) == 1 else 'ies'} left in {directory}"
                       + (" — run 'tuner restore' to put them back" if left else ""), err=True)
            return
        owner = journal.owner() or {}
        done = journal.recover(force=force, dsn=dsn)
        left = journal.listing()
    for r in done:
        click.echo(r.sentence())
    failed = [r for r in done if not r.ok]
    if failed:
        error = RefusedError if all(r.action == "refused" for r in failed) else JournalError
        raise error(
            f"{len(failed)} of {len(done)} journal entries were not put back; {journal.path} keeps them "
            f"({'; '.join(left)})",
            hint="fix the cause and run 'tuner restore' again (--dsn for another connection string to the staging "
                 "clone); or put an entry back by hand and drop it with 'tuner restore --forget N'",
        )
    click.echo(
        f"tuner: {len(done)} journal entr{'y' if len(done) == 1 else 'ies'} of session {owner.get('session')} "
        f"(pid {owner.get('pid')}) handled; {journal.path} removed",
        err=True,
    )


RESTORE_EXIT_TEXT = """\b
Exit status:
  0  everything put back (or dropped), or nothing to restore
  1  an entry could not be put back (it stays in the journal), or another
     tuner holds the journal
  2  bad input: the journal is damaged or not tuner's, a configuration or
     --forget value is wrong
  3  only refusals by the interlock: an ALTER SYSTEM entry's server is not
     a marked staging clone"""


def _writer(cfg: Config) -> Any:
    return SysfsWriter(cfg.readahead.helper_command)


@click.command()
@with_store_options
@click.option("--older-than", "older_than", required=True, metavar="DURATION",
              help="Remove what is older than this duration: 90d, 12h, 1d12h (units s, m, h, d; at most 365d).")
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
def prune(config_path: Path | None, state_dir: Path | None, older_than: str, dry_run: bool) -> None:
    """Remove old stored sessions, drift events and the daemon's finished runs from the store.

    Kept whatever their age: each target's newest session (the next session's warm start) and every
    session whose recommendation is in force (what the daemon serves on /v1/recommendations and
    re-validates). Queued and deferred daemon work stays. It is one transaction: all of it or nothing.

    \b
    Examples:
      tuner prune --older-than 180d --dry-run
      tuner prune --older-than 365d --config /etc/tuner/tuner.toml
    """
    try:
        seconds = parse_duration(older_than)
    except ValueError as exc:
        raise ConfigError(f"--older-than {older_than!r}: {exc}", hint="give a duration such as 90d or 12h") from None
    before = datetime.now(UTC) - timedelta(seconds=seconds)
    cfg = store_config(config_path, state_dir)

    async def work(store: Any) -> Any:
        return await store.retention.prune(before, dry_run=dry_run)

    counts = with_store(cfg, work)
    verb = "would remove" if dry_run else "removed"
    click.echo(f"tuner: {verb} {counts['sessions']} session(s), {counts['drift_events']} drift event(s) and "
               f"{counts['daemon_runs']} finished daemon run(s) from before {before:%Y-%m-%d %H:%M} UTC; kept "
               f"{counts['kept']} older session(s) that are a target's newest or hold a recommendation in force")


restore.epilog = CONFIG_TEXT + "\n\n" + RESTORE_EXIT_TEXT
prune.epilog = STORE_TEXT + "\n\n" + STORE_CONFIG_TEXT + "\n\n" + STORE_EXIT_TEXT
