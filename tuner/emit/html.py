"""The HTML report (``--format html``, report.html): what was measured and why the decision follows, as pictures.

One self-contained page: inline CSS and inline SVG, no scripts, fonts, images or links to anything outside it, so
it opens offline, in a mail attachment, from an artefact store, and prints. Sections: a one-paragraph summary;
the recommendations (the text report's table, with the commands that apply them); per search, every probed value
and the confirmation trials around today's value and the recommendation; per confirmation, every paired trial, the
per-pair ratios and the improvement's 95 % interval against the minimum effect; each family's own section (its
``html_sections``: the readahead family's devices, the WAL family's throughput and waits); and, given the stored
sessions of the same target (``history``), each knob's recommendation over sessions.

This module is the page; the figures are in :mod:`tuner.emit.figures`, drawn with the chart kit
:mod:`tuner.emit.svg` from the report's data as :mod:`tuner.emit.evidence` arranges it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from tuner import __version__
from tuner.emit import host as host_emit
from tuner.emit import query_lines, ranges, sql, wording
from tuner.emit.evidence import attach, by_knob, confirmations, knob_label, min_effect, searches
from tuner.emit.io_panel import io_sections
from tuner.emit.figures import confirmation_figure, effects_figure, history_figure, search_1d, search_2d
from tuner.emit.svg import Figures, esc, finite, num, ratio
from tuner.families import REGISTRY
from tuner.families.base import objective_unit
from tuner.report.model import Recommendation, Report


CSS = """
:root{color-scheme:light}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:#1b1b1b;
background:#fff;margin:0 auto;max-width:1080px;padding:24px 28px 48px}
h1{font-size:1.6rem;margin:0 0 .2rem}
h2{font-size:1.25rem;margin:2.2rem 0 .6rem;padding-top:.6rem;border-top:1px solid #ddd}
h3{font-size:1.05rem;margin:1.6rem 0 .3rem}
p{margin:.5rem 0;max-width:75ch}
.meta{color:#555;margin:0;max-width:none}
.verdict{font-size:1.2rem;font-weight:700;margin:1rem 0 .3rem;padding:.5rem .8rem;border-left:6px solid #0072B2;
background:#f2f7fb;max-width:none}
.verdict.change{border-color:#009E73;background:#eef8f4}
.verdict.keep{border-color:#6b6b6b;background:#f4f4f4}
nav{font-size:.9rem;margin:.6rem 0}
nav a{margin-right:1rem;color:#0b5394}
figure{margin:1.6rem 0 1.8rem;break-inside:avoid;page-break-inside:avoid}
figure>h3{margin:0 0 .4rem}
.scroll{overflow-x:auto}
figcaption{font-size:.9rem;color:#444;max-width:85ch;margin-top:.3rem}
svg.chart{display:block;width:100%;min-width:560px;max-width:940px;height:auto;font-family:inherit}
svg text{font-size:13px}
svg text:not([fill]){fill:#1b1b1b}
svg .tick{font-size:12px}
svg .small{font-size:12px}
svg .note{font-size:11.5px}
svg text.note:not([fill]),svg tspan.note{fill:#555}
svg .axis-label{font-size:13px;font-weight:600}
svg .line-label{font-size:12.5px;font-weight:700}
table{border-collapse:collapse;font-size:.9rem;margin:.6rem 0;max-width:100%}
th,td{border-bottom:1px solid #e2e2e2;padding:.3rem .55rem;text-align:left;vertical-align:top}
th{background:#f5f5f5;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.nowrap{white-space:nowrap}
.tag{display:inline-block;padding:0 .45rem;border-radius:3px;font-weight:700;font-size:.85rem}
.tag.change{background:#009E73;color:#fff}
.tag.keep{background:#e6e6e6;color:#1b1b1b}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.85rem}
pre{background:#f6f6f6;padding:.5rem .7rem;overflow-x:auto;white-space:pre-wrap;overflow-wrap:anywhere;margin:.3rem 0}
.reason{color:#333}
details{margin:.6rem 0}
summary{cursor:pointer;font-weight:600}
summary h3{display:inline;margin:0;font-size:1rem}
footer{margin-top:3rem;color:#666;font-size:.85rem;border-top:1px solid #ddd;padding-top:.6rem}
@media (max-width:600px){body{padding:12px 12px 32px;font-size:14px}}
@media print{body{max-width:none;padding:0;font-size:10.5pt}nav{display:none}h2{break-after:avoid}
a{color:inherit;text-decoration:none}.scroll{overflow:visible}svg.chart{min-width:0;max-width:100%}
details>*{display:block}}
"""


def unit_of(family: str | None) -> str:
    """What ``family``'s trial values measure, as the family declares it (for a family the registry does not know,
    or none: the time of a workload)."""
    if family is None or family not in REGISTRY.names():
        return objective_unit(None)
    return objective_unit(REGISTRY.get(family))


def _tag(decision: str) -> str:
    return '<span class="tag change">CHANGE</span>' if decision == "change" else '<span class="tag keep">keep</span>'


def summary(report: Report, floor: float, floor_stated: bool) -> tuple[str, str]:
    """(verdict class, the verdict and the paragraph as HTML)."""
    t, s = report.target, report.session
    recs = report.recommendations
    changes = [r for r in recs if r.decision == "change"]
    keeps = [r for r in recs if r.decision != "change"]
    with_effect = [r for r in recs if r.effect is not None]
    when = s.started_at.strftime("%Y-%m-%d %H:%M UTC")
    target = (f"PostgreSQL {esc(t.server_version)} ({esc(t.mode)}{', sandbox' if t.sandbox else ''}) on host "
              f"{esc(s.host)}")
    session = (f"Session <code>{esc(s.id)}</code> of {when}: policy {esc(s.policy)}, {s.probes} probes in "
               f"{s.duration_s:.0f} s, against {target}.")
    floor_note = "" if floor_stated else " (the shipped policies' value; this report does not state its own)"
    if not recs:
        failed = [f for f in report.families if f.status != "done"]
        why = "; ".join(f"{esc(f.family)}: {esc(f.reason)}" for f in failed) or "no family produced a measurement"
        return "keep", (f'<p class="verdict keep">No recommendation: nothing could be measured. Keep what you have.</p>'
                        f"<p>{why}. {session}</p>")

    def effect_text(r: Recommendation) -> str:
        e = r.effect
        assert e is not None
        # A keep's candidate is named as what was tried against today's value, never as "today → candidate".
        moved = (f"{esc(r.current)} → {esc(r.recommended)}" if r.decision == "change"
                 else f"{esc(r.recommended)} against today's {esc(r.current)}")
        return (f"<strong>{esc(knob_label(r))}</strong> {moved}: "
                f"{ratio(e.improvement)} faster (95 % CI {e.ci95[0]:.2f}–{e.ci95[1]:.2f}× over {e.n_pairs} pairs)")

    if changes:
        names = ", ".join(f"{esc(knob_label(r))} {esc(r.current)} → {esc(r.recommended)}" for r in changes)
        verdict = (f'<p class="verdict change">Change {len(changes)} setting{"s" * (len(changes) != 1)}: {names}'
                   f"{f'; keep {len(keeps)}' if keeps else ''}.</p>")
        best = max((r for r in changes if r.effect), key=lambda r: r.effect.improvement, default=None)  # type: ignore[union-attr]
        lead = (f"The biggest measured effect is {effect_text(best)} — the whole interval clears the minimum effect "
                f"{floor:g}×{floor_note}. ") if best else ""
        return "change", verdict + f"<p>{lead}{session}</p>"
    verdict = (f'<p class="verdict keep">Keep what you have: no measured change clears the minimum effect '
               f"{floor:g}×{floor_note}.</p>")
    best = max(with_effect, key=lambda r: r.effect.improvement, default=None)  # type: ignore[union-attr]
    lead = (f"The biggest measured effect was {effect_text(best)}; its interval reaches below {floor:g}×, so it "
            "does not earn a change. ") if best else "No candidate differed from today's values. "
    return "keep", verdict + f"<p>{lead}{session}</p>"


def recommendations_html(report: Report) -> str:
    if not report.recommendations:
        return "<p>No recommendation.</p>"
    head = ("<tr><th>knob</th><th>today</th><th>recommended</th><th>near-optimal</th><th class=num>improvement</th>"
            "<th>95 % CI</th><th class=num>pairs</th><th>decision</th><th>takes effect</th></tr>")
    rows = []
    for r in report.recommendations:
        e = r.effect
        rows.append(
            f"<tr><td><code>{esc(knob_label(r))}</code></td><td>{esc(r.current)}</td>"
            f"<td>{esc(ranges.recommended_cell(r))}</td>"
            f"<td>{esc(ranges.cell(r)) if r.near_optimal else '–'}</td>"
            f"<td class=num>{ratio(e.improvement) if e else '–'}</td>"
            f"<td class=nowrap>{f'[{e.ci95[0]:.2f}, {e.ci95[1]:.2f}]' if e else '–'}</td>"
            f"<td class=num>{e.n_pairs if e else '–'}</td><td>{_tag(r.decision)}</td><td>{esc(r.requires)}</td></tr>")
    out = [f"<div class=scroll><table>{head}{''.join(rows)}</table></div><ul>"]
    for r in report.recommendations:
        out.append(f"<li><code>{esc(knob_label(r))}</code>: <span class=reason>{esc(r.reason)}</span>")
        out.extend(f"<br><span class=reason>{esc(note)}</span>" for note in ranges.notes(r))
        if r.decision == "change":
            host, apply = host_emit.commands(r), sql.apply_sql(r)
            if host is not None:
                out.append(f"<pre>{esc(host.apply_blockdev)}   # as root on {esc(report.session.host)}\n"
                           f"{esc(host.udev_rule)}   # persist: {esc(host.udev_rule_file)}\n"
                           f"{esc(host.rollback_blockdev)}   # rollback</pre>")
            elif apply:
                reload = " SELECT pg_reload_conf();" if r.scope == "system" else ""
                where = "   -- on the primary" if r.run_on == "primary" else ""
                rollback = sql.rollback_sql(r)
                out.append(f"<pre>{esc(apply + reload + where)}"
                           + (f"\n{esc(rollback + reload)}   -- rollback" if rollback else "") + "</pre>")
            elif why := sql.not_rendered(r):
                out.append(f"<br>not written: {esc(why)}")
            if r.together_with:
                out.append(f"<br>confirmed together with {esc(', '.join(r.together_with))}: apply both")
        out.append("</li>")
    out.append("</ul>")
    return "".join(out)


def queries_html(report: Report, *, heading: str = "h3") -> str:
    """What each query of the workload gains (:mod:`tuner.emit.query_lines`), and the statements left out; each
    confirmed effect's title as a ``heading`` (the daemon's page nests them one level deeper)."""
    out = []
    for group in query_lines.groups(report):
        rows = "".join(
            f"<tr><td>{esc(q.who())}<br><code>{esc(q.text)}</code></td><td class=num>{q.share:.0%} of "
            f"{esc(q.share_of)}</td><td class=num>{q.today_ms:.1f}</td><td class=num>{q.recommended_ms:.1f}</td>"
            f"<td class=num>{ratio(q.improvement)}</td><td class=nowrap>[{q.ci95[0]:.2f}, {q.ci95[1]:.2f}]</td>"
            f"<td class=num>{q.n_pairs}</td></tr>" for q in group.lines)
        out.append(f"<{heading}>{esc(group.title)}</{heading}><div class=scroll><table><tr><th>query</th><th class=num>share</th>"
                   "<th class=num>today ms</th><th class=num>recommended ms</th><th class=num>ratio</th>"
                   f"<th>95 % CI</th><th class=num>pairs</th></tr>{rows}</table></div>")
    if report.left_out:
        out.append("<ul>" + "".join(f"<li>{esc(query_lines.left_out(s))}</li>" for s in report.left_out) + "</ul>")
    return "".join(out)


def families_html(report: Report) -> str:
    rows = []
    for f in report.families:
        work = "".join(f"<pre>{esc(w)}</pre>" for w in f.workload)
        extra = "".join(f"<br>{label}: {esc(v)}" for label, v in (
            ("stopped", f.stop_reason), ("optimiser", f.optimiser), ("cache", f.cache), ("warm start", f.warm_start))
            if v)
        n = len(f.workload)
        details = f"<details><summary>workload ({n} statement{'s' * (n != 1)})</summary>{work}</details>" if work else ""
        rows.append(f"<tr><td>{esc(f.family)}</td><td>{esc(f.status)}</td><td>{esc(f.reason)}{extra}{details}"
                    "</td></tr>")
    table = (f"<div class=scroll><table><tr><th>family</th><th>status</th><th>what happened</th></tr>{''.join(rows)}"
             "</table></div>") if rows else "<p>No family ran.</p>"
    restored = "".join(f"<li>{esc(x)}</li>" for x in report.restored)
    return table + (f"<p>Put back at the end:</p><ul>{restored}</ul>" if restored else "")


def trials_html(report: Report) -> str:
    if not report.trials:
        return "<p>No probe ran.</p>"
    rows = []
    for i, t in enumerate(report.trials, 1):
        cfg = ", ".join(f"{k}={v}" for k, v in t.config.items())
        cache = f"{t.cache.heap_read}/{t.cache.heap_hit}" if t.cache else "–"
        rows.append(f"<tr><td class=num>{i}</td><td>{esc(t.family or '')}</td><td>{esc(t.object or '')}</td>"
                    f"<td>{esc(t.phase)}{f' ({esc(t.arm)})' if t.arm else ''}</td><td><code>{esc(cfg)}</code></td>"
                    f"<td class=num>{num(finite(t.value))}</td><td>{esc(t.status)}"
                    f"{f': {esc(t.reason)}' if t.reason else ''}</td><td class=num>{cache}</td>"
                    f"<td class=num>{t.duration_s:.1f}</td></tr>")
    return (f"<details><summary>every probe ({len(report.trials)})</summary><div class=scroll><table><tr><th>#</th>"
            "<th>family</th><th>object</th><th>phase</th><th>configuration</th><th class=num>value</th>"
            "<th>status</th><th class=num>heap blocks read/hit</th><th class=num>s</th></tr>"
            f"{''.join(rows)}</table></div></details>")


def _history_entries(report: Report, history: Sequence[Any]) -> dict[tuple[str, str | None], list[tuple[str, str, dict[str, Any]]]]:
    sessions: list[tuple[str, str, list[dict[str, Any]]]] = []
    ids = {report.session.id}  # this session's own recommendations come from the report, stored or not
    for s in reversed(list(history)):  # newest first → oldest first
        sid = str(getattr(s, "id", ""))
        if sid in ids:
            continue
        ids.add(sid)
        sessions.append((sid, str(getattr(s, "started_at", "")), list(getattr(s, "decisions", []) or [])))
    sessions.append((report.session.id, report.session.started_at.isoformat(), [
        {"knob": r.knob, "object": r.object, "current": r.current, "recommended": r.recommended,
         "decision": r.decision, "improvement": r.effect.improvement if r.effect else None,
         "ci95": list(r.effect.ci95) if r.effect else None,
         "near_optimal": list(r.near_optimal) if r.near_optimal else None}
        for r in report.recommendations]))
    return by_knob(sessions)


def to_html(report: Report, *, history: Sequence[Any] | None = None) -> str:
    for name in REGISTRY.names():  # a report an older tuner wrote, as each family reads it today
        report = REGISTRY.get(name).upgrade_report(report)
    floor, stated = min_effect(report)
    confs = confirmations(report.trials)
    attach(report.recommendations, confs)
    groups = searches(report, confs)
    figures = Figures()
    fig, next_no = figures.figure, figures.next_no

    s, t = report.session, report.target
    verdict_cls, verdict = summary(report, floor, stated)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="color-scheme" content="light">',
        f'<meta name="generator" content="tuner {esc(__version__)}">',
        f"<title>tuner report {esc(s.id)} — PostgreSQL {esc(t.server_version)}</title>",
        f"<style>{CSS}</style></head><body>",
        "<header><h1>tuner report</h1>",
        f'<p class="meta">session <code>{esc(s.id)}</code> · {s.started_at.strftime("%Y-%m-%d %H:%M:%S UTC")} · '
        f"PostgreSQL {esc(t.server_version)} ({esc(t.mode)}) · policy {esc(s.policy)} · seed {s.seed} · "
        f"host {esc(s.host)} · kernel {esc(s.kernel)}</p></header>",
    ]
    sections: list[tuple[str, str, str]] = []  # (id, heading, body)
    # recommendations
    sections.append(("recommendations", "Recommendations", recommendations_html(report)))
    if per_query := queries_html(report):
        sections.append(("queries", "Per query", per_query))
    # search
    body = []
    for g in groups:
        unit = unit_of(g.family)
        where = f" on {esc(g.object)}" if g.object else ""
        n_conf = sum(len(c.trials) for c in g.confirmations)
        knobs = g.knobs
        status = {k: sum(1 for x in g.trials if x.status == k) for k in ("failed", "rejected")}
        bad = ", ".join(f"{n} {k}" for k, n in status.items() if n)
        head = f"<h3>{esc(' × '.join(knobs))}{where} <small>({esc(g.family or '')})</small></h3>"
        decided = "change" if any(r.decision == "change" for r in g.recs) else "keep" if g.recs else None
        # Folded like the confirmations below, open where the search found a change: the page was ~8,000 px long
        # with every search drawn, and a kept setting's search is what a reader opens only to check (issue #47).
        body.append(f"<details{' open' if decided == 'change' else ''}><summary>{head} · {len(g.trials)} probes"
                    f"{f' · {_tag(decided)}' if decided else ''}</summary>")
        head = ""
        if len(knobs) == 2:
            body.append(fig(head, search_2d(g, knobs[0], knobs[1], next_no(), unit=unit),
                f"Each point is one measured search probe ({len(g.trials)}{f', {bad}' if bad else ''}); its colour "
                f"and the number beside it are its time in {esc(unit)}, lower is better (a configuration probed more "
                "than once is a cluster of points labelled with their median) — these are measurements, "
                "not the optimiser's model, which the report does not keep. The dashed ring is today's "
                "configuration, the solid ring the candidate confirmed against it"
                f"{f' ({n_conf} paired trials: see the confirmation below)' if n_conf else ''}."))
        else:
            for k in knobs:
                rec = g.rec(k)
                near = (f" The shaded band is the near-optimal range {esc(rec.near_optimal[0])}..{esc(rec.near_optimal[1])}"
                        " (values the search's measurements cannot tell apart from the best: the model's 95 % interval"
                        " for their time reaches within the minimum effect of the best's)"
                        f"{', a plateau' if rec.plateau else ''}." if rec and rec.near_optimal else "")
                others = f" Other knobs of this search vary too ({esc(', '.join(x for x in knobs if x != k))})." if len(knobs) > 2 else ""
                body.append(fig(head, search_1d(g, k, next_no(), unit=unit),
                    f"Every probe's measured time in {esc(unit)}, lower is better: {len(g.trials)} search probes"
                    f"{f' ({bad})' if bad else ''} as filled circles and {n_conf} confirmation trials as hollow "
                    "markers, spread sideways around today's value and the candidate. These are measurements; the "
                    f"optimiser's model curve is not stored in the report.{near}{others}"))
        body.append("</details>")
    if not body:
        body.append("<p>No search probe ran.</p>")
    sections.append(("search", "What was probed", "".join(body)))
    # confirmation
    body = []
    if any(r.effect for r in report.recommendations):
        body.append(fig("", effects_figure(report.recommendations, floor, next_no()),
            "Each confirmed candidate's improvement (geometric mean of the paired ratios) with its 95 % interval. "
            f"A change needs the whole interval right of the dashed minimum-effect line ({floor:g}×"
            f"{'' if stated else ', the default: the report does not state it'}); the decision used a somewhat "
            "wider interval that is valid over every look of the sequential test."))
    for c in confs:
        names = ", ".join(esc(knob_label(r)) for r in c.recs)
        changed = ", ".join(f"{esc(k)} {esc(c.baseline[k])} → {esc(c.candidate[k])}" for k in c.changed) if c.baseline and c.candidate else ""
        where = f" on {esc(c.object)}" if c.object else ""
        e = c.recs[0].effect if c.recs else None
        result = (f" Result: {ratio(e.improvement)} (95 % CI {e.ci95[0]:.2f}–{e.ci95[1]:.2f}×, p = {e.p_value:.2g}) — "
                  f"{_tag(c.recs[0].decision)}." if e else "")
        # Folded, one line each with its result: every pair drawn made the page ~8,000 px long, and the figure
        # above already shows every confirmation's interval against the minimum effect (issue #47).
        decision = c.recs[0].decision if c.recs else None
        short = f" · {ratio(e.improvement)} [{e.ci95[0]:.2f}, {e.ci95[1]:.2f}]" if e else ""
        body.append(f"<details><summary><h3>"
                    f"{changed or 'baseline against candidate'}{where}</h3> · {len(c.pairs)} pairs{short}"
                    f"{f' · {_tag(decision)}' if decision else ''}</summary>" + fig("",
            confirmation_figure(c, floor, next_no(), unit=unit_of(c.family)),
            f"{len(c.trials)} confirmation trials{f' for {names}' if names else ''}, run in ABBA / BAAB blocks so "
            "a drift cancels within each block. Top: each pair's two measured times (square: today's value, "
            "diamond: the candidate), joined. Bottom: each pair's ratio baseline / candidate; above the dashed line "
            f"the candidate was faster by more than the minimum effect.{result}") + "</details>")
    if not body:
        body.append("<p>No confirmation ran: no candidate differed from today's values, or nothing was searched.</p>")
    sections.append(("confirmation", "Confirmation: paired trials", "".join(body)))
    # each family's own measurements, in the registry's order
    for name in REGISTRY.names():
        sections.extend(REGISTRY.get(name).html_sections(report, figures))
    sections.extend(io_sections(report, figures))  # what limited the reads (the device's counters)
    # history
    if history is not None:
        entries = _history_entries(report, history)
        body = []
        once = [key for key, ent in entries.items() if len(ent) < 2]
        for key, ent in sorted(entries.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
            if len(ent) < 2:
                continue
            body.append(fig(f"<h3>{esc(key[0])}{f' ({esc(key[1])})' if key[1] else ''}</h3>",
                history_figure(key, ent, floor, next_no()),
                f"{len(ent)} sessions on this target, oldest first. Top: today's value then (square) and the "
                "recommendation (diamond: change, circle: keep) with its near-optimal range. Bottom: the "
                "improvement's 95 % interval, where one was measured."))
        if len({sid for ent in entries.values() for sid, _, _ in ent}) <= 1:
            body.insert(0, "<p>No earlier stored session of this target: the history starts here.</p>")
        elif once:
            names = ", ".join(f"<code>{esc(k)}{f' ({esc(o)})' if o else ''}</code>" for k, o in sorted(once, key=str))
            body.append(f"<p>Recommended in one stored session only (no figure): {names}.</p>")
        sections.append(("history", "Over sessions", "".join(body)))
    sections.append(("details", "Families and probes", families_html(report) + trials_html(report)))

    parts.append("<nav>" + "".join(f'<a href="#{sid}">{heading}</a>' for sid, heading, _ in sections) + "</nav>")
    verdict += "".join(f'<p class="scope">{esc(line)}</p>' for line in wording.scope_lines(report))
    parts.append(f'<section id="summary" class="{verdict_cls}">{verdict}</section>')
    for sid, heading, content in sections:
        parts.append(f'<section id="{sid}"><h2>{heading}</h2>{content}</section>')
    parts.append(f"<footer>tuner {esc(__version__)} · report schema {report.schema_version} · this page is "
                 "self-contained: no scripts, no external files; the numbers behind it are in report.json.</footer>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


class HtmlReport:
    """A self-contained page for people: the figures behind the decision (report.html)."""

    name: ClassVar[str] = "html"
    stdout: ClassVar[bool] = True
    wants_history: ClassVar[bool] = True

    def render(self, report: Report, *, history: Sequence[Any] | None = None) -> dict[str, str]:
        return {"report.html": to_html(report, history=history)}
