"""``tuner recommend``: one session, its report on stdout and in --output, stored."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
import sys
from pathlib import Path
from typing import Any

import click

from tuner import emit
from tuner import log as tlog
from tuner.cli.common import CONFIG_HELP, CONFIG_TEXT, EXIT_TEXT
from tuner.config import SEED_MAX, Config
from tuner.configured import load_config
from tuner.emit import FORMATS
from tuner.errors import ConfigError, TunerError
from tuner.families import REGISTRY
from tuner.policy import load_policy
from tuner.progress import TerminalProgress
from tuner.stop import STOP
from tuner.store import store_location


@click.command()
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
    # The session stack (scikit-optimize, scikit-learn, scipy) takes seconds to import: only a session pays for it.
    from tuner.stored import run_stored

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
            progress_cm = TerminalProgress()
        with progress_cm as progress:
            # A store that fails once the report exists is returned: the operator still gets the report, and the
            # caller says it was not stored.
            done = await run_stored(cfg, policy, store=store, history=True, use_sandbox=sandbox,
                                    families=cfg.tuner.families, budget=budget, progress=progress,
                                    warm_start=warm_start)
        where = done.problem or (store_location(cfg) if done.stored else None)
        return done.report, where, done.history

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


recommend.help = inspect.cleandoc(recommend.help or "") + "\n\n" + CONFIG_TEXT + "\n\n" + EXIT_TEXT
