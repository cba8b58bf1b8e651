"""``tuner workload``: the workload a session would probe, previewed — for now the statements of
``pg_stat_statements`` that ``[workload] from = "pg_stat_statements"`` replays, and those it leaves out."""

from __future__ import annotations

import asyncio
import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import click

from tuner import log as tlog
from tuner.cli.common import CONFIG_HELP, CONFIG_TEXT, require_target
from tuner.probes import statements
from tuner.session.endpoints import endpoint
from tuner.settings.config import Config
from tuner.settings.config_load import load_config
from tuner.settings.policy import Policy, load_policy

SHOW_EXIT_TEXT = """\b
Exit status:
  0  the ranking was read (also when no statement can be replayed)
  1  the target could not be reached, or pg_stat_statements cannot be read
  2  bad input: configuration, policy or command-line value
  3  refused by the safety interlock: the target is not a staging server"""


@click.group()
def workload() -> None:
    """Preview the workload a session would probe."""


@workload.command("show")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help=CONFIG_HELP)
@click.option("--dsn", help="Target connection string or URI (overrides [target] dsn).")
@click.option("--statements", "count", type=click.IntRange(1, 50), help="Replay at most this many statements "
              "(overrides [workload] statements; default 5).")
@click.option("--share", type=click.FloatRange(0, 1, min_open=True), help="Stop once the kept statements cover "
              "this share of the read I/O (overrides [workload] share; default 0.8).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="What to print on stdout.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              help="Log detail on stderr (default: warning).")
def show(**opts: Any) -> None:
    """Rank pg_stat_statements and show what a session would replay.

    Reads pg_stat_statements of the target's database (or of [workload]
    stats_dsn, e.g. the primary, read-only) and ranks its statements by the
    read I/O they cost: shared_blk_read_time (blk_read_time before 17)
    where track_io_timing was on, else shared_blks_read. From the top, a
    statement is replayed if it only reads, read something from disk, and
    can be replayed faithfully: each $n filled with a value from the
    statistics of the column it is compared to, the filled statement
    planned with a bitmap heap scan (from 17 also a sequential scan) — the
    same scans as its generic plan on 16+ — and run once, read-only, within
    the policy's statement timeout. Up to [workload] statements of them,
    until they cover [workload] share of the read I/O; each is weighted by
    its share. Every other statement is listed with the reason it is left
    out.

    Changes nothing: the target must pass the safety interlock (a staging
    server), and every statement runs in a read-only transaction. This
    previews [workload] from = "pg_stat_statements" whatever [workload]
    from says.

    \b
    Examples:
      tuner workload show --dsn 'host=standby1 dbname=app user=tuner'
      tuner workload show --statements 3 --format json
    """
    overrides: dict[str, dict[str, Any]] = {}
    for section, key, opt in (("target", "dsn", "dsn"), ("workload", "statements", "count"),
                              ("workload", "share", "share"), ("tuner", "log_level", "log_level")):
        if opts[opt] not in (None, ""):
            overrides.setdefault(section, {})[key] = opts[opt]
    overrides.setdefault("tuner", {}).setdefault("log_level", "warning")
    cfg = load_config(opts["config_path"], overrides=overrides)
    tlog.configure(cfg.tuner.log_level)
    policy = load_policy(cfg.tuner.policy, config_dir=cfg.source.parent if cfg.source else None)
    require_target(cfg, sandbox=False)
    sel, version = asyncio.run(preview(cfg, policy))  # a ProbeError (no pg_stat_statements): one sentence, exit 1
    if opts["fmt"] == "json":
        click.echo(json.dumps(as_json(sel, cfg), indent=2))
    else:
        click.echo(render(sel, cfg, version, width=shutil.get_terminal_size((100, 24)).columns))


async def preview(cfg: Config, policy: Policy) -> tuple[statements.Selection, str]:
    """The selection a session would make on the configured target (cleared by the interlock), and its version."""
    target, _ = await endpoint(cfg, cfg.target.dsn, None, writable=False, sandbox=False)
    conn = await target.connect()
    try:
        sel = await statements.select(conn, cfg.workload, server_version_num=target.facts.server_version_num,
                                      statement_timeout_s=policy.guardrails.statement_timeout_s,
                                      connect_timeout_s=cfg.target.connect_timeout_s)
    finally:
        await conn.close()
    return sel, target.facts.server_version


def _verdicts(sel: statements.Selection) -> dict[int | None, tuple[str, str]]:
    """Per queryid: ("replay", its weight) or ("left out", the reason)."""
    out: dict[int | None, tuple[str, str]] = {}
    for q in sel.queries:
        out[q.queryid] = ("replay", f"weight {q.weight:.2f}")
    for lo in sel.left_out:
        out[lo.queryid or None] = ("left out", lo.reason)
    return out


def as_json(sel: statements.Selection, cfg: Config) -> dict[str, Any]:
    """The preview as data: every statement examined, in rank order, with what a session does with it."""
    sql = {q.queryid: q.sql for q in sel.queries}
    weight = {q.queryid: q.weight for q in sel.queries}
    reasons = {lo.queryid or None: lo.reason for lo in sel.left_out}
    rows = []
    for i, r in enumerate(sel.ranking, 1):
        s = r.statement
        if s.queryid not in weight and s.queryid not in reasons:
            continue  # a utility or system-catalog statement: not the operator's workload
        rows.append({"rank": i, "queryid": s.queryid, "share": round(r.share, 4), "blocks_read": s.blocks_read,
                     "read_time_ms": round(s.read_time_ms, 1), "calls": s.calls, "text": s.text,
                     "replayed": s.queryid in weight, "weight": weight.get(s.queryid),
                     "sql": sql.get(s.queryid), "reason": reasons.get(s.queryid)})
    return {"from": cfg.workload.queries_from, "read_from": sel.read_from,
            "ranked_by": "read_time" if sel.by_time else "blocks_read", "covered": round(sel.covered, 4),
            "statements": rows, "notes": sel.notes}


def render(sel: statements.Selection, cfg: Config, version: str, *, width: int = 100) -> str:
    """The preview as text for a terminal ``width`` columns wide (at least 60)."""
    width = max(60, width)
    by = "read time (track_io_timing)" if sel.by_time else "blocks read (track_io_timing was off)"
    out = textwrap.wrap(f"tuner workload: pg_stat_statements read on {sel.read_from} (PostgreSQL {version}), "
                        f"ranked by {by}", width, subsequent_indent="  ")
    if cfg.workload.queries_from != "pg_stat_statements":
        out += textwrap.wrap('[workload] from is "generated": a session would not replay these until it says '
                             '"pg_stat_statements"', width, subsequent_indent="  ")
    verdicts = _verdicts(sel)
    out.append("")
    shown = 0
    pad = " " * 6
    for i, r in enumerate(sel.ranking, 1):
        s = r.statement
        if s.queryid not in verdicts:
            continue
        shown += 1
        what, why = verdicts[s.queryid]
        cost = f", {s.read_time_ms:.0f} ms read" if sel.by_time else ""
        name = f"q{s.queryid}" if s.queryid is not None else "(hidden)"
        calls = f"{s.calls} call{'s' if s.calls != 1 else ''}"
        out += textwrap.wrap(f"{i:>4}  {name}: {r.share:.1%} of the read I/O ({s.blocks_read} blocks{cost}, {calls})",
                             width, subsequent_indent=pad)
        text = " ".join(s.text.split())
        out += textwrap.wrap(text[:200] + ("…" if len(text) > 200 else ""), width, initial_indent=pad,
                             subsequent_indent=pad, break_long_words=False)
        out += textwrap.wrap(f"{what}: {why}", width, initial_indent=pad, subsequent_indent=pad + "  ",
                             break_long_words=False)
    if not shown:
        out.append("  no statement of this database in pg_stat_statements yet")
    kept = len(sel.queries)
    out += ["", *textwrap.wrap(f"Result: {kept} statement{'s' if kept != 1 else ''} replayed, covering "
                               f"{sel.covered:.0%} of the read I/O; {len(sel.left_out)} left out."
                               + "".join(f" {n}." for n in sel.notes) + " Nothing was changed.", width)]
    return "\n".join(out)


show.epilog = CONFIG_TEXT + "\n\n" + SHOW_EXIT_TEXT
workload.epilog = """\b
Exit status: as each subcommand's --help says."""
