"""The ``tuner`` command line."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import click

from tuner import __version__, report_file
from tuner import log as tlog
from tuner import redact, tomlwriter
from tuner.config import SEED_MAX, Config, load_config
from tuner.emit import FORMATS
from tuner.families import REGISTRY
from tuner.errors import ConfigError, TunerError
from tuner.policy import load_policy

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


def _fail(err: TunerError) -> None:
    click.echo(f"tuner: error: {err}", err=True)
    if err.hint:
        click.echo(f"hint: {err.hint}", err=True)
    sys.exit(err.exit_code)


def _usage(err: click.UsageError) -> None:
    """A bad option or argument, in the format of every other bad input: one sentence and a hint, exit 2."""
    no_args = getattr(click.exceptions, "NoArgsIsHelpError", None)
    if no_args is not None and isinstance(err, no_args):
        raise err
    where = err.ctx.command_path if err.ctx else "tuner"
    _fail(ConfigError(err.format_message().rstrip("."), hint=f"see '{where} --help'"))


class _Group(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as err:
            _usage(err)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TunerError as err:
            _fail(err)
        except click.UsageError as err:
            _usage(err)
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


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="tuner")
def main() -> None:
    """tuner — measured I/O settings for PostgreSQL.

    tuner probes PostgreSQL's I/O settings on a staging replica (a hot standby, or a writable clone
    marked tuner.role = 'staging'), searches them with Bayesian optimisation, confirms the winner
    against today's settings with paired, interleaved trials and a 95 % confidence interval, and
    emits ALTER SYSTEM statements with their evidence and a rollback — or says "keep what you have"
    when the evidence is not there. It never probes a primary.

    \b
    Start here:
      tuner recommend --sandbox           try it on a throwaway PostgreSQL that tuner starts itself
      tuner recommend --dsn 'host=standby1 dbname=app' --format sql
      tuner config validate --print       show the effective configuration
      tuner restore                       put back what a killed session changed (readahead, WAL settings)
      tuner history                       stored sessions and their decisions; tuner show / diff / prune
      tuner daemon --config /etc/tuner/tuner.toml   run it as a service (schedule, drift, HTTP API)
    """


@main.command()
@click.option("--config", "config_path", type=click.Path(path_type=Path), help=CONFIG_HELP)
@click.option("--dsn", help="Target connection string or URI (overrides [target] dsn). Must be a hot standby or a marked staging clone.")
@click.option("--sandbox", is_flag=True, help="Create a throwaway primary + hot standby, tune the standby, then remove everything.")
@click.option("--scale", type=click.IntRange(1, 10000), help="Sandbox dataset size, pgbench-style (100,000 accounts per unit; default 50 ≈ 640 MB).")
@click.option("--pg-version", type=int, help="Sandbox PostgreSQL major version, 15-19 (overrides [sandbox] pg_version; built on first use, then cached).")
@click.option("--device", help="With --sandbox, the kind of disk its loop device emulates (root): local (default), ram, hdd, iops=N, mbps=N, latency=Xms, comma-separated, e.g. latency=1ms,iops=3000.")
@click.option("--family", "families", multiple=True, type=click.Choice(REGISTRY.names()), help="Knob family to tune (repeatable; default: all the target allows).")
@click.option("--policy", help="Policy name (default, ssd, network, hdd) or path to a policy TOML file.")
@click.option("--budget", type=click.IntRange(3, 500), help="Most optimisation probes per family (overrides the policy).")
@click.option("--seed", type=click.IntRange(0, SEED_MAX), help="Seed for the optimiser (results are reproducible for a given seed and target).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), help="What to print on stdout (default: table).")
@click.option("--output", type=click.Path(path_type=Path, file_okay=False), help="Also write report.json, recommendation.sql, rollback.sql and report.txt (and readahead.sh, readahead-rollback.sh, 99-tuner-readahead.rules when readahead changes) into DIR, atomically.")
@click.option("--no-store", is_flag=True, help="Do not store this session (and do not warm-start from stored ones).")
@click.option("--cold", is_flag=True, help="Start every search cold, even where stored sessions on a matching target could warm-start it (the session is still stored).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), help="Log detail on stderr (default: info).")
def recommend(**opts: Any) -> None:
    """Probe, optimise, confirm and recommend — once.

    For each knob family, tuner plans a cold-cache workload from the target's own statistics, empties
    the caches before every probe, lets a Gaussian-process optimiser choose the values to probe, and
    confirms the best one against today's value in ABBA-ordered pairs until the 95 % interval decides.

    \b
    Families (--family; default: every family the target allows):
      concurrency  effective_io_concurrency, by SET in the probe session: nothing persistent changes.
                   Sparse bitmap heap scans over the largest relations. Fine on a hot standby.
                   On 17+ also a cold sequential scan (weights in the policy's [concurrency]), searched
                   jointly with io_combine_limit; on 18 io_workers (ALTER SYSTEM + reload, journaled,
                   on tuner's sandbox or a marked clone) and, with restarts allowed, io_method screened.
                   On 17+ with pg_buffercache, shared buffers are emptied by eviction, not a restart.
      readahead    read_ahead_kb of each block device under the data directory, pg_wal and the
                   tablespaces, jointly with effective_io_concurrency where a bitmap scan exists
                   (cold sequential + bitmap scans, fresh connections). Needs tuner on the staging
                   host as root (or [readahead] helper_command); skipped with a reason otherwise.
                   Every change is journaled first and restored at the end, on Ctrl-C and SIGTERM,
                   and after a crash by the next start or `tuner restore`. Recommends blockdev/sysfs
                   commands with a udev rule, and per-tablespace ALTER TABLESPACE where tablespaces
                   live on their own devices.
      wal          commit_delay / wal_writer_delay (searched), wal_compression and, with restarts,
                   wal_buffers (screened), under concurrent 10- and 1000-row inserts into a scratch
                   schema; reports the WALInsert / WALWrite / WALSync wait shares and TPS per client
                   count. Needs a writable clone marked tuner.role = 'staging' (the sandbox marks its
                   primary); skipped on a hot standby. ALTER SYSTEM changes are journaled and
                   postgresql.auto.conf is put back byte for byte. Durability settings never change.
      replay       maintenance_io_concurrency on a hot standby (recovery prefetch, 15+): the time the
                   standby takes to replay a fixed stream of random-page updates made on its primary,
                   with replay paused and the standby's caches emptied before each probe. Needs the
                   sandbox (its primary and standby) and tuner on the host; the setting is journaled
                   (ALTER SYSTEM on the standby), and the standby is left replaying, as it was.

    Results go to stdout; logs (one line per probe) go to stderr — JSON when stderr is not a terminal.

    Every session is stored (tuner.db in the state directory, or the PostgreSQL database of [store]
    url): `tuner history`, `tuner show` and `tuner diff` read it back. Where a stored session ran on a
    matching target (the same system identifier, else the same device model, file system and
    PostgreSQL major), a search starts warm from its trials: it re-measures today's value and that
    session's winner first, rescales the stored times to today's, and needs fewer probes. --cold
    turns that off; --no-store turns the store off. A store that cannot be read stops the run
    before anything is probed (exit 2); one that fails when the report is written leaves the
    report on stdout and in --output, says so, and exits 2.

    \b
    Examples:
      tuner recommend --sandbox
      tuner recommend --sandbox --scale 10 --format json
      tuner recommend --dsn postgresql://tuner@standby1/app --policy ssd --output /var/lib/tuner/out
    """
    overrides: dict[str, dict[str, Any]] = {}
    for section, key, opt in (("target", "dsn", "dsn"), ("sandbox", "scale", "scale"), ("sandbox", "device", "device"),
                              ("sandbox", "pg_version", "pg_version"),
                              ("tuner", "policy", "policy"), ("tuner", "log_level", "log_level"), ("output", "format", "fmt")):
        if opts[opt] not in (None, ""):
            overrides.setdefault(section, {})[key] = opts[opt]
    if opts["device"] and not opts["sandbox"]:
        raise ConfigError("--device emulates a disk under tuner's own sandbox, not under a target", hint="add --sandbox")
    if opts["families"]:
        overrides.setdefault("tuner", {})["families"] = list(opts["families"])
    if opts["seed"] is not None:
        overrides.setdefault("tuner", {})["seed"] = opts["seed"]
    if opts["output"]:
        overrides.setdefault("output", {})["directory"] = str(opts["output"])
    cfg = load_config(opts["config_path"], overrides=overrides)
    tlog.configure(cfg.tuner.log_level)
    policy = load_policy(cfg.tuner.policy, config_dir=cfg.source.parent if cfg.source else None)
    if not opts["sandbox"] and not cfg.target.dsn:
        if not any(k in os.environ for k in ("PGHOST", "PGSERVICE", "PGDATABASE", "PGPORT")):
            raise ConfigError(
                "no target: give --dsn, set [target] dsn in tuner.toml, set PGHOST, or use --sandbox",
                hint="tuner recommend --sandbox tries it on a throwaway PostgreSQL",
            )
    report, stored, history = _run(cfg, policy, sandbox=opts["sandbox"], budget=opts["budget"],
                                   store=not opts["no_store"], warm_start=not opts["cold"])

    from tuner import emit

    # With the session stored, the HTML report shows its target's earlier sessions too (as `tuner show` does).
    if cfg.output.directory is not None:
        written = emit.write_outputs(report, cfg.output.directory, history=history)
        click.echo(f"tuner: wrote {', '.join(str(p) for p in written)}", err=True)
    click.echo(emit.text(report, cfg.output.format, history=history), nl=False)
    if isinstance(stored, TunerError):
        where = f" (it is on stdout{' and in ' + str(cfg.output.directory) if cfg.output.directory else ''})"
        raise type(stored)(f"{stored}; the report was not stored{where}", hint=stored.hint)
    if stored:
        click.echo(f"tuner: stored session {report.session.id} in {stored}", err=True)
    if not report.recommendations and any(f.status == "failed" for f in report.families):
        click.echo("tuner: nothing could be measured; the report says why for each family", err=True)
        sys.exit(4)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _run(cfg: Config, policy: Any, *, sandbox: bool, budget: int | None, store: bool = True,
         warm_start: bool = True) -> tuple[Any, str | TunerError | None, list[Any] | None]:
    """The session, where it was stored (None: not stored; an error: storing it failed), and its target's stored
    sessions, newest first (None where it was not stored or they could not be read)."""
    from tuner.runner import recommend as run_recommend
    from tuner.stop import STOP
    from tuner.store import StoreError, open_store, store_location

    async def guarded() -> Any:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def stop(signum: int) -> None:
            # SIGTERM (systemd stop, kill), Ctrl-C and SIGHUP (a dropped ssh session) all stop the session the
            # same way, so every clean-up path runs. Only the first cancels: a second signal must not interrupt
            # the clean-up. The flag makes the stop stick at the next probe boundary even if something
            # swallowed the cancellation.
            if not STOP.requested:
                task.cancel()
            STOP.request(signum)

        for sig in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, ValueError):
                loop.add_signal_handler(sig, stop, sig)
        progress_cm: Any = contextlib.nullcontext(None)
        if sys.stderr.isatty():
            from tuner.progress import TerminalProgress

            progress_cm = TerminalProgress()
        # The store is opened first: one that cannot be read stops the run before anything is probed.
        async with open_store(cfg, enabled=store) as db:
            with progress_cm as progress:
                report = await run_recommend(
                    cfg, policy, use_sandbox=sandbox, families=cfg.tuner.families, budget=budget, progress=progress,
                    store=db, warm_start=warm_start,
                )
            if db is None:
                return report, None, None
            try:
                await db.save(report, report.target.fingerprint or {})
            except StoreError as exc:  # the operator still gets the report; the caller says it was not stored
                return report, exc, None
            try:
                history = await _target_history(db, report)
            except StoreError as exc:  # stored; only the report's history section is missing
                tlog.get_logger("tuner.store").warning("store.history", error=str(exc))
                history = None
            return report, store_location(cfg), history

    STOP.reset()
    try:
        result = asyncio.run(guarded())
        STOP.check()  # a stop that arrived as the session ended: no report, the signal's exit status
        return result
    except asyncio.CancelledError:
        name = signal.Signals(STOP.signal).name if STOP.signal else "a signal"
        click.echo(f"tuner: stopped by {name}; everything tuner changed was put back and everything it started "
                   "was stopped and removed", err=True)
        sys.exit(128 + (STOP.signal or signal.SIGTERM))


@main.command()
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
      tuner restore                           the default state directory (/var/lib/tuner as root)
      tuner restore --state-dir /srv/tuner
      tuner restore --dsn 'host=staging1 dbname=app'   where the journal's DSN needs other options
      tuner restore --forget 2                drop entry 2 (put back by hand) without writing it
      tuner restore --forget all              drop the whole journal, even a damaged one

    \b
    Exit status:
      0  everything put back (or dropped), or nothing to restore
      1  an entry could not be put back (it stays in the journal), or another tuner holds the journal
      2  bad input: the journal is damaged or not tuner's, a configuration or --forget value is wrong
      3  only refusals by the interlock: an ALTER SYSTEM entry's server is not a marked staging clone
    """
    from tuner.actuate import Journal, JournalError
    from tuner.config import state_dir as configured_state_dir
    from tuner.errors import RefusedError

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


def _writer(cfg: Config) -> Any:
    from tuner.actuate import SysfsWriter

    return SysfsWriter(cfg.readahead.helper_command)


STORE_TEXT = """\b
The store: tuner.db (SQLite) in the state directory — /var/lib/tuner as root, else
~/.local/state/tuner — or [store] path; or a PostgreSQL database shared by a fleet: [store] url
(tables in its schema 'tuner'). A damaged store, or one written by a newer tuner, is refused with
one sentence (exit 2) and never changed."""


def _store_config(config_path: Path | None, state_dir: Path | None) -> Config:
    overrides = {"tuner": {"state_dir": str(state_dir)}} if state_dir else None
    cfg = load_config(config_path, overrides=overrides)
    tlog.configure(cfg.tuner.log_level)
    return cfg


def _with_store(cfg: Config, work: Any) -> Any:
    """Run ``work(store)`` against the configured store; an absent SQLite store is not created by a reader."""
    from tuner.store import open_store, store_location

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


_store_options = [
    click.option("--config", "config_path", type=click.Path(path_type=Path), help=CONFIG_HELP),
    click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False),
                 help="The state directory whose tuner.db to read (overrides [tuner] state_dir)."),
]


def _with_store_options(fn: Any) -> Any:
    for option in reversed(_store_options):
        fn = option(fn)
    return fn


@main.command()
@_with_store_options
@click.option("--target", "target", metavar="ID", help="Only this target's sessions (its id from this listing, or a prefix).")
@click.option("--limit", type=click.IntRange(1, 10000), default=20, show_default=True, help="Most sessions to list.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True, help="Text for people, or JSON.")
def history(config_path: Path | None, state_dir: Path | None, target: str | None, limit: int, fmt: str) -> None:
    """List stored sessions, newest first, grouped by target: when, what ran, and each decision with its
    improvement, 95 % interval and near-optimal range.

    \b
    Examples:
      tuner history
      tuner history --target 3f2a --limit 5
      tuner history --format json | jq '.[0].decisions'
    """
    from tuner.store import store_location
    from tuner.store.views import history_json, history_text

    cfg = _store_config(config_path, state_dir)
    if target is not None and not re.fullmatch(r"[0-9a-fA-F]{1,16}", target):
        raise ConfigError(f"--target {target!r} is not a target id (hexadecimal, as 'tuner history' lists them)",
                          hint="run 'tuner history' to see the target ids")

    async def work(store: Any) -> Any:
        return await store.sessions(target=target, limit=limit)

    sessions = _with_store(cfg, work)
    click.echo(history_json(sessions) if fmt == "json" else history_text(sessions, store_location(cfg)), nl=False)


@main.command()
@_with_store_options
@click.argument("session", required=False)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help="The output format, as for 'tuner recommend'.")
@click.option("--output", type=click.Path(path_type=Path, file_okay=False), help="Also write every output file into DIR, as 'tuner recommend --output' does.")
def show(config_path: Path | None, state_dir: Path | None, session: str | None, fmt: str, output: Path | None) -> None:
    """Print one stored session's report (default: the newest) in any output format.

    SESSION is a session id as 'tuner history' lists it, or a unique prefix of one, or 'latest'.
    The report is the one the session wrote: `tuner show ID --format json` prints what
    `tuner recommend --format json` printed then.

    \b
    Examples:
      tuner show
      tuner show 3f2a91 --format sql > apply.sql
      tuner show latest --output /srv/tuner/out
    """
    from tuner import emit

    report, history = _export_source(config_path, state_dir, session or "latest")
    if output is not None:
        written = emit.write_outputs(report, output, history=history)
        click.echo(f"tuner: wrote {', '.join(str(p) for p in written)}", err=True)
    click.echo(emit.text(report, fmt, history=history), nl=False)


@main.command()
@_with_store_options
@click.argument("first")
@click.argument("second", required=False)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True, help="Text for people, or JSON.")
def diff(config_path: Path | None, state_dir: Path | None, first: str, second: str | None, fmt: str) -> None:
    """Say what changed between two stored sessions: the target (version, system identifier, device,
    kernel), the settings in force and their sources, and each knob's decision, value, interval and
    near-optimal range.

    FIRST and SECOND are session ids or unique prefixes; SECOND defaults to the newest session.

    \b
    Examples:
      tuner diff 3f2a91 8c07d2
      tuner diff 3f2a91 --format json
    """
    from tuner.store.views import diff as compare
    from tuner.store.views import diff_text

    cfg = _store_config(config_path, state_dir)

    async def work(store: Any) -> Any:
        a = await store.report(await store.resolve(first))
        b = await store.report(await store.resolve(second))
        return compare(a, b)

    d = _with_store(cfg, work)
    click.echo(json.dumps(d, indent=2, ensure_ascii=False) + "\n" if fmt == "json" else diff_text(d), nl=False)


@main.command()
@click.option("--config", "config_path", type=click.Path(path_type=Path), help=CONFIG_HELP)
@click.option("--sandbox", is_flag=True, help="Tune a sandbox of the daemon's own (created at start, removed at stop) instead of [target]: for trying it out.")
@click.option("--scale", type=click.IntRange(1, 10000), help="The sandbox's dataset size (as for recommend --sandbox).")
@click.option("--listen", metavar="HOST:PORT", help="The HTTP API's address (overrides [daemon] listen; default 127.0.0.1:8187).")
@click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False), help="The journal, the lock and the store's directory (overrides [tuner] state_dir).")
@click.option("--check-config", is_flag=True, help="Validate the configuration (and the token file, windows, schedule, policies), print what the daemon would do, and exit.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), help="Log detail on stderr (default: info; JSON lines unless stderr is a terminal).")
def daemon(config_path: Path | None, sandbox: bool, scale: int | None, listen: str | None, state_dir: Path | None,
           check_config: bool, log_level: str | None) -> None:
    """Run tuner as a background service: scheduled sessions, drift detection, re-validation, an HTTP API.

    \b
    What it does ([daemon] in tuner.toml; durations as 30s, 10m, 2h, 7d):
      schedule = "0 2 * * 6"        full sessions on this crontab (5 fields, local time)
      windows = ["Sat 01:00-05:00"]  probing runs only inside these (empty: any time); a session
                                     that reaches the end of its window stops cleanly (everything
                                     restored) and runs again in the next one
      drift_check_every = "10m"     a cheap check, no probes: PostgreSQL version, system identifier,
                                     timeline, postmaster start, the tuned settings and their
                                     source, each device's model/serial/scheduler/read_ahead_kb,
                                     kernel, cgroup limits, database size band. A change is stored
                                     as a drift event and queues what it calls for: a new major or
                                     device -> a full session; a setting drifted from an accepted
                                     recommendation -> a re-validation; growth, kernel, cgroup or an
                                     untuned change -> a re-probe of the families concerned
      revalidate_every = "7d"       the accepted recommendations are confirmed again against their
                                     baseline in paired trials; one whose interval no longer clears
                                     the policy's minimum effect is withdrawn, with the evidence
    The daemon never applies anything: config management pulls GET /v1/recommendations.

    \b
    Targets: [target] (as for `tuner recommend`), named "default", and each [[daemon.targets]]
    (name, dsn, restart_command, families, policy). Work runs one at a time, queued in the store.
    Its confirmations use the policy's [daemon] budget (longer than recommend's: more power).

    \b
    HTTP API (listen = "127.0.0.1:8187"; JSON):
      GET  /healthz /readyz /metrics (Prometheus)
      GET  /v1/recommendations[?target=NAME]    accepted recommendations, report schema
      GET  /v1/recommendations/NAME?format=conf (or ansible, patroni, sql, …) rendered
      GET  /v1/sessions  /v1/sessions/ID  /v1/drift
      POST /v1/sessions {"target": NAME, "families": [...], "kind": "session"|"revalidate"}
           runs now, in or out of the window: 202 with the session id
    POST needs Authorization: Bearer <the token in [daemon] token_file> (no token_file: no POST).
    Listening on anything but loopback needs token_file, and then every endpoint but /healthz
    needs the token.

    \b
    Operation:
      one daemon per state directory (a second one exits with a sentence naming the first);
      systemd Type=notify (READY, RELOADING, STOPPING, STATUS, WATCHDOG); see
      examples/systemd/tuner.service. SIGHUP re-reads the configuration (a bad one keeps the
      old one, says why, and sets tuner_config_last_reload_successful 0); SIGTERM/SIGINT end
      the current probe, restore everything and exit 0 within 30 s. After a SIGKILL or a
      crash, the next start restores the journal first and records the run as interrupted.

    \b
    Examples:
      tuner daemon --check-config --config /etc/tuner/tuner.toml
      tuner daemon --config /etc/tuner/tuner.toml
      tuner daemon --sandbox --scale 4        then: curl -s localhost:8187/v1/sessions
    """
    overrides: dict[str, dict[str, Any]] = {}
    if listen:
        overrides.setdefault("daemon", {})["listen"] = listen
    if state_dir:
        overrides.setdefault("tuner", {})["state_dir"] = str(state_dir)
    if log_level:
        overrides.setdefault("tuner", {})["log_level"] = log_level
    if scale:
        overrides.setdefault("sandbox", {})["scale"] = scale
    cfg = load_config(config_path, overrides=overrides)
    tlog.configure(cfg.tuner.log_level)
    from tuner.daemon.service import Daemon, check

    lines = check(cfg, sandbox=sandbox)
    if check_config:
        click.echo(f"tuner: the daemon's configuration is valid ({cfg.source or 'defaults'})")
        for line in lines:
            click.echo(f"  {line}")
        return
    code = asyncio.run(Daemon(cfg, config_path=config_path, overrides=overrides, sandbox=sandbox).run())
    sys.exit(code)


@main.group()
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
        data = _redacted(cfg.model_dump(mode="json", exclude={"source"}))
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


@main.command()
@_with_store_options
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
    from datetime import UTC, datetime, timedelta

    from tuner.daemon.timespec import parse_duration

    try:
        seconds = parse_duration(older_than)
    except ValueError as exc:
        raise ConfigError(f"--older-than {older_than!r}: {exc}", hint="give a duration such as 90d or 12h") from None
    before = datetime.now(UTC) - timedelta(seconds=seconds)
    cfg = _store_config(config_path, state_dir)

    async def work(store: Any) -> Any:
        return await store.prune(before, dry_run=dry_run)

    counts = _with_store(cfg, work)
    verb = "would remove" if dry_run else "removed"
    click.echo(f"tuner: {verb} {counts['sessions']} session(s), {counts['drift_events']} drift event(s) and "
               f"{counts['daemon_runs']} finished daemon run(s) from before {before:%Y-%m-%d %H:%M} UTC; kept "
               f"{counts['kept']} older session(s) that are a target's newest or hold a recommendation in force")


main.help = inspect.cleandoc(main.help or "") + "\n\n" + CONFIG_TEXT + "\n\n" + EXIT_TEXT
for _cmd in (history, show, diff, prune):
    _cmd.help = inspect.cleandoc(_cmd.help or "") + "\n\n" + STORE_TEXT + "\n\n" + CONFIG_TEXT
recommend.help = inspect.cleandoc(recommend.help or "") + "\n\n" + CONFIG_TEXT + "\n\n" + EXIT_TEXT
restore.help = inspect.cleandoc(restore.help or "") + "\n\n" + CONFIG_TEXT
validate.help = inspect.cleandoc(validate.help or "") + "\n\n" + CONFIG_TEXT


@main.command()
@_with_store_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), required=True,
              help="conf, ansible, patroni, cnpg, zalando, udev, tuned (config management), or table, json, sql.")
@click.option("--from", "source", metavar="SESSION|FILE",
              help="A stored session: its id as 'tuner history' lists it, a unique prefix, or 'latest' (the default); "
                   "or the path of a report.json that tuner wrote.")
@click.option("--output", type=click.Path(path_type=Path, file_okay=False),
              help="Write the format's files and their rollback twins (under rollback/) into DIR, each atomically; "
                   "without it the main file goes to stdout.")
def export(config_path: Path | None, state_dir: Path | None, fmt: str, source: str | None,
           output: Path | None) -> None:
    """Render a session's "change" decisions for config management, each with its evidence and a rollback twin.

    \b
    Formats and their files (--output DIR writes them all; stdout gets the first):
      conf     conf.d/99-tuner.conf for include_dir; rollback/conf.d/99-tuner.conf
      ansible  ansible/tuner-vars.yml + ansible/tuner.yml (community.postgresql); rollback/ansible/
      patroni  patroni/patroni-config.yaml (patronictl edit-config --apply), patroni/patch-config.json
               (PATCH /config); rollback/patroni/
      cnpg     cnpg/cluster-patch.yaml, a merge patch for a CloudNativePG Cluster; rollback/cnpg/
      zalando  zalando/postgresql-patch.yaml, for a Zalando postgresql resource; rollback/zalando/
      udev     udev/99-tuner-readahead.rules; rollback/udev/
      tuned    tuned/tuned.conf, a tuned profile (disk plugin readahead); rollback/tuned/

    Server settings go to conf, ansible, patroni, cnpg and zalando; tablespace options to ansible (and
    sql); a device's readahead to udev, tuned and ansible. What a format cannot express, or a setting its
    consumer manages itself, is named in a comment with where it goes instead. "Keep what you have" is an
    empty change set that says so.

    \b
    Examples:
      tuner export --format conf                     print conf.d/99-tuner.conf
      tuner export --format ansible --from 3f2a91 --output deploy/tuner
      tuner export --format patroni --from out/report.json --output /tmp/patroni
    """
    from tuner import emit

    report, history = _export_source(config_path, state_dir, source)
    files = emit.render(report, fmt, history=history)
    if output is None:
        click.echo(next(iter(files.values()), ""), nl=False)
        return
    written = _write_files(files, output)
    click.echo(f"tuner: wrote {', '.join(str(p) for p in written)}", err=True)


_SESSION_REF = re.compile(r"[0-9a-fA-F]+|latest")


def _export_source(config_path: Path | None, state_dir: Path | None,
                   source: str | None) -> tuple[Any, list[Any] | None]:
    """The report to export and the stored sessions of its target, newest first (None for a report.json: its
    history is not known). ``show`` passes only session references (an invalid one is refused by the store)."""
    if source is not None and not _SESSION_REF.fullmatch(source) and (
            Path(source).exists() or "/" in source or source.endswith(".json")):
        return report_file.read(Path(source)), None
    cfg = _store_config(config_path, state_dir)

    async def work(store: Any) -> Any:
        report = await store.report(await store.resolve(source))
        return report, await _target_history(store, report)

    return _with_store(cfg, work)  # type: ignore[no-any-return]


async def _target_history(store: Any, report: Any) -> list[Any] | None:
    """The stored sessions of ``report``'s target, newest first (None where the report is not among them)."""
    from tuner.store import target_id

    fp = report.target.fingerprint or {}
    target = target_id(report.target.system_identifier, fp.get("data_directory"),
                       str(fp.get("label") or report.target.dsn))
    history = await store.sessions(target=target)
    return history if any(s.id == report.session.id for s in history) else None


def _write_files(files: dict[str, str], directory: Path) -> list[Path]:
    """Each file into ``directory`` atomically; a directory that cannot be written is one sentence (exit 2)."""
    from tuner.files import atomic_write

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


export.help = inspect.cleandoc(export.help or "") + "\n\n" + STORE_TEXT + "\n\n" + CONFIG_TEXT
