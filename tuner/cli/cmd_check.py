"""``tuner check``: a preflight of a session — every safety and capability check, changing nothing."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import click

from tuner import log as tlog
from tuner.cli.common import CONFIG_HELP, CONFIG_TEXT, require_target
from tuner.settings.config_load import load_config
from tuner.errors import ConfigError
from tuner.families import REGISTRY
from tuner.settings.policy import load_policy
from tuner.session.check import run as run_preflight
from tuner.report.preflight import Preflight

CHECK_EXIT_TEXT = """\b
Exit status:
  0  the session may run (warnings and skipped families are listed)
  1  the target could not be reached, or an unexpected failure
  2  bad input: configuration, policy or command-line value
  3  refused by the safety interlock: a session would stop there"""


@click.command(context_settings={"max_content_width": 80})
@click.option("--config", "config_path", type=click.Path(path_type=Path), help=CONFIG_HELP)
@click.option("--dsn", help="Target connection string or URI (overrides [target] dsn).")
@click.option("--sandbox", is_flag=True, help="Check tuner's own throwaway sandbox instead (it is created for "
              "the check and removed after it, as a session's is).")
@click.option("--scale", type=click.IntRange(1, 10000), help="With --sandbox, its dataset size (default 50).")
@click.option("--family", "families", multiple=True, type=click.Choice(REGISTRY.names()),
              help="Family a session would tune (repeatable; default: all of them).")
@click.option("--policy", help="Policy name (default, ssd, network, hdd) or path to a policy TOML file.")
@click.option("--budget", type=click.IntRange(3, 500), help="Optimisation probes per family, as given to "
              "'tuner recommend' (for the estimate).")
@click.option("--time-restart", "time_cold", is_flag=True, help="Restart the target and empty the page cache, "
              "twice, timed, as a session does before every cold probe, so the estimate includes them (with "
              "--sandbox always).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="What to print on stdout.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              help="Log detail on stderr (default: warning).")
def check(**opts: Any) -> None:
    """Check a target before a session: what would run, what not, and why.

    Connects as 'tuner recommend' would and runs the checks a session runs
    before it probes, with the same code: the safety interlock (a primary is
    refused), the role's privileges, [target] restart_command, whether the OS
    page cache can be emptied and readahead written, pg_buffercache eviction,
    and on PostgreSQL 18 the asynchronous-I/O settings it may search. Then, per
    family, whether it runs and why not, and the workload it would probe; an
    estimate of the session's probes, restarts, page-cache drops and duration
    (from the policy's budgets and one timed, read-only run of each
    workload); and every missing privilege with the GRANT that adds it.

    Changes nothing: read-only queries only — no probe, no cache emptied, no
    setting, journal, store or file written. The restart command is not run,
    unless --time-restart asks to time it (twice, each with a page-cache drop).

    \b
    Examples:
      tuner check --dsn 'host=standby1 dbname=app user=tuner'
      tuner check --dsn postgresql://tuner@standby1/app --format json
      tuner check --sandbox --scale 1
    """
    overrides: dict[str, dict[str, Any]] = {}
    for section, key, opt in (("target", "dsn", "dsn"), ("sandbox", "scale", "scale"), ("tuner", "policy", "policy"),
                              ("tuner", "log_level", "log_level")):
        if opts[opt] not in (None, ""):
            overrides.setdefault(section, {})[key] = opts[opt]
    if opts["scale"] and not opts["sandbox"]:
        raise ConfigError("--scale sizes tuner's own sandbox, not a target", hint="add --sandbox, or drop --scale")
    overrides.setdefault("tuner", {}).setdefault("log_level", "warning")
    cfg = load_config(opts["config_path"], overrides=overrides)
    tlog.configure(cfg.tuner.log_level)
    policy = load_policy(cfg.tuner.policy, config_dir=cfg.source.parent if cfg.source else None)
    require_target(cfg, sandbox=opts["sandbox"])
    found = asyncio.run(run_preflight(cfg, policy, use_sandbox=opts["sandbox"],
                                      families=opts["families"] or cfg.tuner.families, budget=opts["budget"],
                                      time_cold=opts["time_cold"]))
    if opts["fmt"] == "json":
        data = found.model_dump(mode="json")
        data["refused"] = found.refused
        data["busy"] = found.busy
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(render(found, width=shutil.get_terminal_size((80, 24)).columns))
    if found.refused:
        sys.exit(3)


def render(found: Preflight, *, width: int = 80) -> str:
    """The preflight as text for a terminal ``width`` columns wide (at least 60)."""
    width = max(60, width)
    head = f"tuner check: {found.target}" + (f" (PostgreSQL {found.server_version}"
           f"{', ' + found.mode.replace('_', ' ') if found.mode else ''})" if found.server_version else "")
    out = textwrap.wrap(head, width, subsequent_indent="  ")

    def row(name: str, status: str, text: str, indent: int = 0) -> None:
        head = f"{' ' * indent}{name:<{18 - indent}} {status:<5} "
        out.extend(textwrap.wrap(text, width, initial_indent=head, subsequent_indent=" " * len(head),
                                 break_on_hyphens=False) or [head.rstrip()])

    out += ["", "Checks"]
    for c in found.checks:
        row(c.name, c.status, c.detail + (f" — fix: {c.fix}" if c.fix else ""))
    out += ["", "Families"]
    for p in found.families:
        row(p.family, "runs" if p.runs else "skip", p.reason)
        for c in p.checks:
            row(c.name, c.status, c.detail + (f" — fix: {c.fix}" if c.fix else ""), indent=2)
        for sql in p.workload:
            row("workload", "", sql, indent=2)
    out += ["", "Missing privileges"]
    if not found.missing:
        out.append("  none")
    else:
        out += textwrap.wrap("Run these as a superuser on the primary (they replicate to its standbys):", width)
        for g in found.missing:
            out += textwrap.wrap(f"{g.privilege}: {g.needed_for}", width, initial_indent="  ", subsequent_indent="    ")
            out.append(f"    {g.sql}")
    e = found.estimate
    out += ["", "Estimate"]
    if e is None:
        out.append("  no family would run")
    else:
        bound = "at least " if e.cold_start_s is None and (e.restarts_high or e.drops_high) else "about "
        took = ("" if e.duration_low_s is None or e.duration_s is None else
                f"; {bound}{_duration(e.duration_s)} of probing ({_duration(e.duration_low_s)} to "
                f"{_duration(e.duration_high_s or 0)})")
        cold = "".join(f", {low}-{high} {what}" for low, high, what in (
            (e.restarts_low, e.restarts_high, "restarts"), (e.drops_low, e.drops_high, "page-cache drops")) if high)
        timed = f", a restart + drop timed at {_duration(e.cold_start_s)}" if e.cold_start_s is not None else ""
        out += textwrap.wrap(f"{e.probes_low}-{e.probes_high} probes{cold}{timed}{took}.", width,
                             initial_indent="  ", subsequent_indent="  ")
        out += textwrap.wrap(f"How: {e.how}.", width, initial_indent="  ", subsequent_indent="  ")
    verdict = ("refused by the interlock: a session would stop before probing (exit 3)" if found.refused
               else "a session may run once the live session ends (started now, it is refused)" if found.busy
               else "a session may run")
    out += ["", *textwrap.wrap(f"Result: {verdict}. {found.changed_nothing}.", width)]
    return "\n".join(out)


def _duration(seconds: float) -> str:
    return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


check.epilog = CONFIG_TEXT + "\n\n" + CHECK_EXIT_TEXT
