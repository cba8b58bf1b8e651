"""``tuner daemon``: the service, or with --check-config what it would do."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import click

from tuner import log as tlog
from tuner.cli.common import CONFIG_HELP, CONFIG_TEXT
from tuner.settings.config_load import load_config
from tuner.errors import ConfigError


@click.command()
@click.option("--config", "config_path", type=click.Path(path_type=Path), help=CONFIG_HELP)
@click.option("--sandbox", is_flag=True, help="Tune a sandbox of the daemon's own (created at start, removed at stop) instead of [target]: for trying it out.")
@click.option("--scale", type=click.IntRange(1, 10000), help="The sandbox's dataset size (as for recommend --sandbox).")
@click.option("--listen", metavar="HOST:PORT", help="The HTTP API's address (overrides [daemon] listen; default 127.0.0.1:8187).")
@click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False), help="The journal, the lock and the store's directory (overrides [tuner] state_dir).")
@click.option("--check-config", is_flag=True, help="Validate the configuration (and the token file, windows, schedule, policies), print what the daemon would do and when each job runs next (warning when the schedule never meets a window), and exit.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), help="Log detail on stderr (default: info; JSON lines unless stderr is a terminal).")
def daemon(config_path: Path | None, sandbox: bool, scale: int | None, listen: str | None, state_dir: Path | None,
           check_config: bool, log_level: str | None) -> None:
    """Run tuner as a background service: scheduled sessions, drift detection, re-validation, an HTTP API.

    \b
    What it does ([daemon] in tuner.toml; durations as 30s, 10m, 2h, 7d):
      schedule = "0 2 * * 6"
          full sessions on this crontab (5 fields, local time)
      windows = ["Sat 01:00-05:00"]
          probing runs only inside these (empty: any time); a session that
          reaches the end of its window stops cleanly (everything restored)
          and runs again in the next one
      drift_check_every = "10m"
          a cheap check, no probes: PostgreSQL version, system identifier,
          timeline, postmaster start, the tuned settings and their source,
          each device's model, serial, scheduler and read_ahead_kb, kernel,
          cgroup limits, database size band. A change is stored as a drift
          event and queues what it calls for: a new major or device -> a
          full session; a setting drifted from an accepted recommendation ->
          a re-validation; growth, kernel, cgroup or an untuned change -> a
          re-probe of the families concerned
      revalidate_every = "7d"
          the accepted recommendations are confirmed again against their
          baseline in paired trials; one whose interval no longer clears the
          policy's minimum effect is withdrawn, with the evidence
    The daemon never applies anything: config management pulls
    GET /v1/recommendations.

    \b
    Targets: [target] (as for `tuner recommend`), named "default", and each
    [[daemon.targets]] (name, dsn, restart_command, families, policy). Work
    runs one at a time, queued in the store. Its confirmations use the
    policy's [daemon] budget (longer than recommend's: more power).

    \b
    HTTP API (listen = "127.0.0.1:8187"; JSON):
      GET  /       a read-only page for people (targets, what is in force,
                   the latest session, each knob over sessions)
      GET  /healthz /readyz /metrics (Prometheus)
      GET  /v1/recommendations[?target=NAME]   accepted ones, report schema
      GET  /v1/recommendations/NAME?format=conf (or ansible, patroni, sql, …)
      GET  /v1/sessions  /v1/sessions/ID  /v1/drift
      POST /v1/sessions {"target": NAME, "families": [...],
                         "kind": "session"|"revalidate"}
           runs now, in or out of the window: 202 with the session id
    POST needs Authorization: Bearer <the token in [daemon] token_file> (no
    token_file: no POST). Listening on anything but loopback needs
    token_file, and then every endpoint but /healthz needs the token.

    \b
    Operation:
      one daemon per state directory (a second one exits with a sentence
      naming the first); systemd Type=notify (READY, RELOADING, STOPPING,
      STATUS, WATCHDOG); `tuner init DIR` writes the unit (tuner.service),
      alert rules and a dashboard from the package. SIGHUP re-reads
      the configuration (a bad one keeps the old one, says why, and sets
      tuner_config_last_reload_successful 0); SIGTERM/SIGINT end the current
      probe, restore everything and exit 0 within 30 s. After a SIGKILL or a
      crash, the next start restores the journal first and records the run
      as interrupted.

    \b
    Examples:
      tuner daemon --check-config --config /etc/tuner/tuner.toml
      tuner daemon --config /etc/tuner/tuner.toml
      tuner daemon --sandbox --scale 4
          then: curl -s localhost:8187/v1/sessions
    """
    overrides: dict[str, dict[str, Any]] = {}
    if listen:
        overrides.setdefault("daemon", {})["listen"] = listen
    if state_dir:
        overrides.setdefault("tuner", {})["state_dir"] = str(state_dir)
    if log_level:
        overrides.setdefault("tuner", {})["log_level"] = log_level
    if scale:
        if not sandbox:
            raise ConfigError("--scale sizes the dataset of the daemon's own sandbox; a target's data is its own",
                              hint="add --sandbox, or leave --scale out")
        overrides.setdefault("sandbox", {})["scale"] = scale
    cfg = load_config(config_path, overrides=overrides)
    tlog.configure(cfg.tuner.log_level)
    # The daemon's stack (apscheduler, aiohttp, the session stack it warms) is the service's start-up cost, not
    # every command's.
    from tuner.daemon.service import Daemon, check, schedule_warning

    lines = check(cfg, sandbox=sandbox)
    if check_config:
        click.echo(f"tuner: the daemon's configuration is valid ({cfg.source or 'defaults'})")
        for line in lines:
            click.echo(f"  {line}")
        warning = schedule_warning(cfg)
        if warning:
            click.echo(f"tuner: warning: {warning}", err=True)
        return
    code = asyncio.run(Daemon(cfg, config_path=config_path, overrides=overrides, sandbox=sandbox).run())
    sys.exit(code)


DAEMON_EXIT_TEXT = """\b
Exit status:
  0  stopped by SIGTERM or SIGINT with everything restored; or, with
     --check-config, the configuration is valid
  1  another daemon holds the state directory, the worker died, or a bug
  2  bad input: configuration, token file, windows, schedule or a policy"""

daemon.epilog = CONFIG_TEXT + "\n\n" + DAEMON_EXIT_TEXT
