"""Reading the store: ``tuner history``, ``show``, ``diff`` and ``export``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click

from tuner import emit
from tuner.report import file as report_file
from tuner.cli.common import (COLOR_OPTION, STORE_CONFIG_TEXT, STORE_EXIT_TEXT, STORE_TEXT, echo_report,
                              store_config, target_history, terminal, with_store, with_store_options)
from tuner.emit import FORMATS, quote
from tuner.emit.terminal import listing
from tuner.errors import ConfigError, StoreError
from tuner.fs.atomic import write_files
from tuner.report.validate import ReportError
from tuner.emit.diff import diff as session_diff, diff_text
from tuner.emit.history import history_json, history_lines
from tuner.store import store_location


@click.command()
@with_store_options
@click.option("--target", "target", metavar="ID", help="Only this target's sessions (its id from this listing, or a prefix).")
@click.option("--limit", type=click.IntRange(1, 10000), default=20, show_default=True, help="Most sessions to list.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True, help="Text for people, or JSON.")
@COLOR_OPTION
def history(config_path: Path | None, state_dir: Path | None, target: str | None, limit: int, fmt: str,
            color: str) -> None:
    """List stored sessions, newest first, grouped by target: when, what ran, and each decision with its
    improvement, 95 % interval and near-optimal range.

    \b
    Examples:
      tuner history
      tuner history --target 3f2a --limit 5
      tuner history --format json | jq '.[0].decisions'
    """
    cfg = store_config(config_path, state_dir)
    if target is not None and not re.fullmatch(r"[0-9a-fA-F]{1,16}", target):
        raise ConfigError(f"--target {target!r} is not a target id (hexadecimal, as 'tuner history' lists them)",
                          hint="run 'tuner history' to see the target ids")

    async def work(store: Any) -> Any:
        listed = await store.sessions.listing(target=target, limit=limit)
        return listed, {s.id: why for s in listed.sessions if (why := await _unusable(store, s.id))}

    listed, refused = with_store(cfg, work)
    if fmt == "json":  # stdout stays the JSON a program reads; what was left out is said on stderr
        for sentence in listed.unreadable:
            _warn(sentence)
        click.echo(history_json(listed.sessions, refused), nl=False)
        return
    term = terminal(color)
    lines = history_lines(listed.sessions, store_location(cfg), refused) if listed.sessions or \
        not listed.unreadable else []
    lines += [(quote.one_line(sentence), "skipped") for sentence in listed.unreadable]
    echo_report(listing(lines, term), term)


async def _unusable(store: Any, session_id: str) -> str | None:
    """Why ``tuner show`` would refuse this stored session's report (tuner.report.validate), or None. The listing's
    decisions come from the same report, so a session whose report tuner could not have written is listed with
    that sentence instead of them — as in a shared [store] url that another writer tampered with."""
    try:
        await store.sessions.report(session_id)
    except (ReportError, StoreError) as exc:
        return str(exc)
    return None


@click.command()
@with_store_options
@click.argument("session", required=False)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help="The output format, as for 'tuner recommend'.")
@click.option("--output", type=click.Path(path_type=Path, file_okay=False), help="Also write every output file into DIR, as 'tuner recommend --output' does.")
@COLOR_OPTION
def show(config_path: Path | None, state_dir: Path | None, session: str | None, fmt: str, output: Path | None,
         color: str) -> None:
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
    report, history = export_source(config_path, state_dir, session or "latest")
    if output is not None:
        written = emit.write_outputs(report, output, history=history)
        click.echo(f"tuner: wrote {', '.join(str(p) for p in written)}", err=True)
    term = terminal(color)
    echo_report(emit.text(report, fmt, history=history, terminal=term), term)


@click.command()
@with_store_options
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
    cfg = store_config(config_path, state_dir)

    async def work(store: Any) -> Any:
        a = await store.sessions.report(await store.sessions.resolve(first))
        b = await store.sessions.report(await store.sessions.resolve(second))
        return session_diff(a, b)

    d = with_store(cfg, work)
    click.echo(json.dumps(d, indent=2, ensure_ascii=False) + "\n" if fmt == "json" else diff_text(d), nl=False)

@click.command()
@with_store_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), required=True,
              help="conf, ansible, patroni, cnpg, zalando, udev, tuned (config management), or table, json, sql.")
@click.option("--from", "source", metavar="SESSION|FILE",
              help="A stored session: its id as 'tuner history' lists it, a unique prefix, or 'latest' (the default); "
                   "or the path of a report.json that tuner wrote.")
@click.option("--output", type=click.Path(path_type=Path, file_okay=False),
              help="Write the format's files and their rollback twins (under rollback/) into DIR, each atomically; "
                   "without it the main file goes to stdout.")
@COLOR_OPTION
def export(config_path: Path | None, state_dir: Path | None, fmt: str, source: str | None,
           output: Path | None, color: str) -> None:
    """Render a session's "change" decisions for config management, each with its evidence and a rollback twin.

    \b
    Formats and their files (--output DIR writes them all; stdout gets the
    first), each with its rollback twin under rollback/:
      conf     conf.d/99-tuner.conf, for include_dir
      ansible  ansible/tuner-vars.yml + ansible/tuner.yml (community.postgresql)
      patroni  patroni/patroni-config.yaml (patronictl edit-config --apply),
               patroni/patch-config.json (PATCH /config)
      cnpg     cnpg/cluster-patch.yaml, a merge patch for a CloudNativePG Cluster
      zalando  zalando/postgresql-patch.yaml, for a Zalando postgresql resource
      udev     udev/99-tuner-readahead.rules
      tuned    tuned/tuned.conf, a tuned profile (disk plugin readahead)

    Server settings go to conf, ansible, patroni, cnpg and zalando; tablespace options to ansible (and
    sql); a device's readahead to udev, tuned and ansible. What a format cannot express, or a setting its
    consumer manages itself, is named in a comment with where it goes instead. "Keep what you have" is an
    empty change set that says so.

    \b
    Examples:
      tuner export --format conf        print conf.d/99-tuner.conf
      tuner export --format ansible --from 3f2a91 --output deploy/tuner
      tuner export --format patroni --from out/report.json \\
          --output /tmp/patroni
    """
    report, history = export_source(config_path, state_dir, source)
    if output is None:
        term = terminal(color)
        echo_report(emit.text(report, fmt, history=history, terminal=term), term)
        return
    files = emit.render(report, fmt, history=history)
    written = write_files(files, output)
    click.echo(f"tuner: wrote {', '.join(str(p) for p in written)}", err=True)


_SESSION_REF = re.compile(r"[0-9a-fA-F]+|latest")


def export_source(config_path: Path | None, state_dir: Path | None,
                   source: str | None) -> tuple[Any, list[Any] | None]:
    """The report to export and the stored sessions of its target, newest first (None for a report.json: its
    history is not known). ``show`` passes only session references (an invalid one is refused by the store)."""
    if source is not None and not source.strip():  # (Path("") is ".", which would be read as a directory)
        raise ConfigError("--from is empty", hint=report_file.FROM_HINT)
    if source is not None and not _SESSION_REF.fullmatch(source) and (
            Path(source).exists() or "/" in source or source.endswith(".json")):
        return report_file.read(Path(source)), None
    cfg = store_config(config_path, state_dir)

    async def work(store: Any) -> Any:
        report = await store.sessions.report(await store.sessions.resolve(source))
        return report, await target_history(store, report, unreadable=_warn)

    return with_store(cfg, work)  # type: ignore[no-any-return]


for _cmd in (history, show, diff, export):
    _cmd.epilog = STORE_TEXT + "\n\n" + STORE_CONFIG_TEXT + "\n\n" + STORE_EXIT_TEXT


def _warn(sentence: str) -> None:
    """A stored row left out of a listing: one line on stderr, beside the output a program may read on stdout."""
    click.echo(f"tuner: warning: {quote.one_line(sentence)}", err=True)
