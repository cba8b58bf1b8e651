"""``tuner recommend``: one session, its report on stdout and in --output, stored."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import signal
import sys
from pathlib import Path
from typing import Any

import click

from tuner import emit
from tuner import log as tlog
from tuner.cli.common import (COLOR_OPTION, CONFIG_HELP, CONFIG_TEXT, EXIT_TEXT, Sectioned, echo_report,
                              require_target, terminal)
from tuner.sandbox.device.cloud import NAMED
from tuner.settings.config import SEED_MAX, Config
from tuner.settings.config_load import load_config
from tuner.emit import FORMATS
from tuner.errors import ConfigError, TunerError
from tuner.families import REGISTRY
from tuner.fs.atomic import check_directory
from tuner.settings.policy import load_policy
from tuner.cli.progress_bar import TerminalProgress, most_probes
from tuner.session.stop import STOP
from tuner.store import store_location


SECTIONS = (
    ("Target", ("config_path", "dsn", "policy")),
    ("Sandbox (tuner's own throwaway primary and hot standby)", ("sandbox", "scale", "pg_version", "device")),
    ("Search", ("families", "budget", "seed", "cold")),
    ("Output", ("fmt", "output", "color", "no_store", "log_level")),
)


@click.command(cls=Sectioned, sections=SECTIONS)
@click.option("--config", "config_path", type=click.Path(path_type=Path), metavar="PATH",
              help="Configuration file (default: ./tuner.toml).")
@click.option("--dsn", metavar="DSN", help="Target connection string or URI (overrides [target] dsn): a hot "
                                           "standby or a marked staging clone.")
@click.option("--policy", metavar="NAME|PATH", help="Policy: default, ssd, network, hdd, or a policy file.")
@click.option("--sandbox", is_flag=True, help="Tune a throwaway primary + hot standby, then remove them.")
@click.option("--scale", type=click.IntRange(1, 10000), metavar="N",
              help="Its dataset size, pgbench-style (default 50 ≈ 640 MB).")
@click.option("--pg-version", type=int, metavar="N", help="Its PostgreSQL major, 15-19 (built on first use).")
@click.option("--device", metavar="KIND", help="As root: the disk it emulates — local, ram, hdd, iops=N, mbps=N, "
                                               "latency=Xms, flush=Xms, wiops=N, wmbps=N, comma-separated; or alone: "
                                               f"{', '.join(NAMED)}.")
@click.option("--family", "families", multiple=True, type=click.Choice(REGISTRY.names()), metavar="NAME",
              help=f"{', '.join(REGISTRY.names())} (repeatable; default: all the target allows).")
@click.option("--budget", type=click.IntRange(3, 500), metavar="N", help="Most optimisation probes per family.")
@click.option("--seed", type=click.IntRange(0, SEED_MAX), metavar="N", help="Seed for the optimiser.")
@click.option("--cold", is_flag=True, help="Do not warm-start from stored sessions (still store this one).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), metavar="NAME",
              help="What stdout gets: table (default), json, sql, html, or an export format.")
@click.option("--output", type=click.Path(path_type=Path, file_okay=False), metavar="DIR",
              help="Also write the report's files (JSON, text, HTML, SQL and rollback, readahead scripts) into "
                   "DIR, atomically.")
@COLOR_OPTION
@click.option("--no-store", is_flag=True, help="Do not store this session (nor warm-start).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), metavar="LEVEL",
              help="debug, info (default), warning, error: detail on stderr.")
def recommend(**opts: Any) -> None:
    """Probe, optimise, confirm and recommend — once.

    For each knob family, tuner plans a cold-cache workload from the target's
    own statistics, empties the caches before every probe, lets a
    Gaussian-process optimiser choose the values to probe, and confirms the
    best one against today's value in ABBA-ordered pairs until the 95 %
    interval decides. The report goes to stdout; logs (one line per probe)
    to stderr, as JSON when stderr is not a terminal.

    \b
    Families (--family; default: every family the target allows):
      concurrency  effective_io_concurrency (17+ io_combine_limit, 18
                   io_workers and io_method) by SET: fine on a hot standby
      readahead    read_ahead_kb of the devices under the data directory,
                   pg_wal and tablespaces; tuner on the staging host as root
      wal          commit_delay, wal_writer_delay, wal_compression,
                   wal_buffers; a writable clone marked tuner.role='staging'
      replay       maintenance_io_concurrency: a standby's replay time
                   (the sandbox's primary and standby)
    A family the target does not allow is skipped with the reason. Every
    persistent change is journaled first and put back (`tuner restore` after
    a crash); durability settings never change. Details: docs/guide.md in
    the source repository (not in the wheel).

    Every session is stored (`tuner history`, `show`, `diff` read it back);
    a later search on a matching target starts warm from it.

    \b
    Examples:
      tuner recommend --sandbox
      tuner recommend --sandbox --scale 10 --format json
      tuner recommend --dsn postgresql://tuner@standby1/app --policy ssd \\
          --output /var/lib/tuner/out
    """
    overrides: dict[str, dict[str, Any]] = {}
    for section, key, opt in (("target", "dsn", "dsn"), ("sandbox", "scale", "scale"), ("sandbox", "device", "device"),
                              ("sandbox", "pg_version", "pg_version"),
                              ("tuner", "policy", "policy"), ("tuner", "log_level", "log_level"), ("output", "format", "fmt")):
        if opts[opt] not in (None, ""):
            overrides.setdefault(section, {})[key] = opts[opt]
    sandbox_only(opts)
    if opts["families"]:
        overrides.setdefault("tuner", {})["families"] = list(opts["families"])
    if opts["seed"] is not None:
        overrides.setdefault("tuner", {})["seed"] = opts["seed"]
    if opts["output"]:
        overrides.setdefault("output", {})["directory"] = str(opts["output"])
    cfg = load_config(opts["config_path"], overrides=overrides)
    tlog.configure(cfg.tuner.log_level)
    policy = load_policy(cfg.tuner.policy, config_dir=cfg.source.parent if cfg.source else None)
    require_target(cfg, sandbox=opts["sandbox"])
    if cfg.output.directory is not None:  # refused before the session, not after it
        check_directory(cfg.output.directory)
    report, stored, history = _run(cfg, policy, sandbox=opts["sandbox"], budget=opts["budget"],
                                   store=not opts["no_store"], warm_start=not opts["cold"])

    # With the session stored, the HTML report shows its target's earlier sessions too (as `tuner show` does).
    if cfg.output.directory is not None:
        written = emit.write_outputs(report, cfg.output.directory, history=history)
        click.echo(f"tuner: wrote {', '.join(str(p) for p in written)}", err=True)
    term = terminal(opts["color"])
    echo_report(emit.text(report, cfg.output.format, history=history, terminal=term), term)
    if isinstance(stored, TunerError):
        where = f" (it is on stdout{' and in ' + str(cfg.output.directory) if cfg.output.directory else ''})"
        raise type(stored)(f"{stored}; the report was not stored{where}", hint=stored.hint)
    if stored:
        click.echo(f"tuner: stored session {report.session.id} in {stored}", err=True)
    if not report.recommendations and any(f.status == "failed" for f in report.families):
        click.echo("tuner: nothing could be measured; the report says why for each family", err=True)
        sys.exit(4)


# What each sandbox-only option does, for the sentence that refuses it without --sandbox: silently ignoring it
# would run against the target with a dataset, version or disk the operator did not get.
SANDBOX_ONLY = {
    "device": "--device emulates a disk under tuner's own sandbox, not under a target",
    "scale": "--scale sizes the dataset of tuner's own sandbox; a target's data is its own",
    "pg_version": "--pg-version picks the PostgreSQL of tuner's own sandbox; a target runs the version it runs",
}


def sandbox_only(opts: dict[str, Any]) -> None:
    """Refuse, in one sentence, a sandbox-only option given without ``--sandbox`` (ConfigError, exit 2)."""
    for name, sentence in SANDBOX_ONLY.items():
        if opts.get(name) not in (None, "") and not opts["sandbox"]:
            raise ConfigError(sentence, hint="add --sandbox, or leave the option out")


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _run(cfg: Config, policy: Any, *, sandbox: bool, budget: int | None, store: bool = True,
         warm_start: bool = True) -> tuple[Any, str | TunerError | None, list[Any] | None]:
    """The session, where it was stored (None: not stored; an error: storing it failed), and its target's stored
    sessions, newest first (None where it was not stored or they could not be read)."""
    # The session stack (scikit-optimize, scikit-learn, scipy) takes seconds to import: only a session pays for it.
    from tuner.session.stored import run_stored

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
            progress_cm = TerminalProgress(most_probes(policy, cfg.tuner.families, budget))
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


recommend.epilog = CONFIG_TEXT + "\n\n" + EXIT_TEXT
