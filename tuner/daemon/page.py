"""The daemon's page for people (``GET /``): read-only, one self-contained HTML document with no script.

Per target: what is in force — the accepted recommendations (:func:`tuner.store.in_force.in_force`, as
``/v1/recommendations`` serves them) beside the value the server runs with now (read by the last drift check) —,
the newest stored session's verdict with a link to its whole HTML report (and, for a workload of several queries,
what each query gained in its confirmations and which statements it left out, as the report's HTML shows them:
:func:`tuner.emit.html.queries_html`), and each knob's recommendation over the stored sessions, drawn with the HTML
report's own figure (:func:`tuner.emit.figures.history_figure`).

Everything shown comes from outside (target names, DSN-derived labels, tablespace and device names, values) and
passes through :func:`tuner.emit.svg.esc`; labels are already redacted (:func:`tuner.daemon.state.label`).
Pure: it renders what :meth:`tuner.daemon.queries.Queries.page` gathered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tuner import __version__
from tuner.emit.evidence import DEFAULT_MIN_EFFECT, by_knob, knob_label, min_effect
from tuner.emit.figures import history_figure
from tuner.emit.html import CSS, queries_html, summary
from tuner.emit.svg import Figures, as_value, esc, ratio
from tuner.report.model import Recommendation, Report
from tuner.store import SessionSummary

# The page's own additions to the report's style sheet.
PAGE_CSS = """
.status{font-weight:600}
td.applied{color:#00704f;font-weight:600}
td.differs{color:#a33f00;font-weight:600}
.links a{margin-right:1rem}
"""

Key = tuple[str, str | None]


@dataclass(frozen=True)
class TargetPage:
    """One target, as the page shows it."""

    name: str
    label: str  # redacted
    in_force: Sequence[tuple[str, Recommendation]] = ()  # (session id, recommendation), newest session first
    on_server: Mapping[Key, Any] = field(default_factory=dict)  # (knob, object) -> value now; {} before a check
    checked_at: str | None = None  # when on_server was read
    sessions: Sequence[SessionSummary] = ()  # newest first
    latest: Report | None = None  # the newest stored session's report
    running: str | None = None  # what the daemon is doing on it now
    # The settings its configured families tune: only these are listed without a recommendation (None: all read).
    tuned: frozenset[str] | None = None


def render(targets: Sequence[TargetPage], *, status: str, generated_at: datetime) -> str:
    """The page: a header with the daemon's status, then one section per target."""
    figures = Figures()
    nav = "".join(f'<a href="#target-{i}">{esc(t.name)}</a>' for i, t in enumerate(targets, 1))
    body = [_target(t, i, figures) for i, t in enumerate(targets, 1)]
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="color-scheme" content="light">',
        f'<meta name="generator" content="tuner {esc(__version__)}">',
        f"<title>tuner daemon — {len(targets)} target{'s' * (len(targets) != 1)}</title>",
        f"<style>{CSS}{PAGE_CSS}</style></head><body>",
        "<header><h1>tuner daemon</h1>",
        f'<p class="meta">{generated_at.strftime("%Y-%m-%d %H:%M:%S %Z").strip()} · tuner {esc(__version__)} · '
        f'<span class="status">{esc(status)}</span></p></header>',
        f"<nav>{nav}</nav>",
        *body,
        '<footer class="links">Read-only: the daemon never applies anything. The same data as JSON: '
        '<a href="/v1/recommendations">/v1/recommendations</a><a href="/v1/sessions">/v1/sessions</a>'
        '<a href="/v1/drift">/v1/drift</a><a href="/metrics">/metrics</a></footer>',
        "</body></html>",
    ]) + "\n"


def _target(t: TargetPage, i: int, figures: Figures) -> str:
    head = (f'<section id="target-{i}" data-target="{esc(t.name)}"><h2>{esc(t.name)}</h2>'
            f'<p class="meta">{esc(t.label)}{f" · now: {esc(t.running)}" if t.running else ""}</p>')
    parts = [head, "<h3>In force</h3>", _in_force(t)]
    parts.append("<h3>Latest session</h3>")
    if t.latest is None:
        parts.append("<p>No stored session of this target yet.</p>")
    else:
        floor, stated = min_effect(t.latest)
        _, verdict = summary(t.latest, floor, stated)
        sid = esc(t.latest.session.id)
        parts.append(verdict + f'<p class="links"><a href="/v1/sessions/{sid}?format=html">the whole report</a>'
                               f'<a href="/v1/sessions/{sid}">its JSON</a></p>')
        if per_query := queries_html(t.latest, heading="h4"):  # what each query gained, what was left out (#56)
            parts.append(f'<div data-part="queries">{per_query}</div>')
    parts.append("<h3>Over sessions</h3>")
    parts.append(_history(t, figures))
    parts.append("</section>")
    return "".join(parts)


def _same(a: Any, b: Any) -> bool:
    return as_value(a) == as_value(b)


def _in_force(t: TargetPage) -> str:
    rows = []
    shown: set[Key] = set()
    for sid, r in t.in_force:
        key = (r.knob, r.object)
        shown.add(key)
        now = t.on_server.get(key)
        if key not in t.on_server:
            state, cls = "not read yet" if not t.checked_at else "not readable", ""
        elif _same(now, r.recommended):
            state, cls = "applied", "applied"
        else:
            state, cls = "not applied (or changed since)", "differs"
        effect = (f"{ratio(r.effect.improvement)} (95 % CI {r.effect.ci95[0]:.2f}–{r.effect.ci95[1]:.2f}×)"
                  if r.effect else "–")
        rows.append(f'<tr data-knob="{esc(r.knob)}"><td><code>{esc(knob_label(r))}</code></td>'
                    f"<td class=num>{esc(r.recommended)}</td><td class=num>{esc(now) if key in t.on_server else '–'}"
                    f'</td><td class="{cls}">{state}</td><td class=num>{effect}</td>'
                    f'<td><a href="/v1/sessions/{esc(sid)}?format=html"><code>{esc(sid)}</code></a></td></tr>')
    others = sorted((k for k in t.on_server if k not in shown and (t.tuned is None or k[0] in t.tuned)),
                    key=lambda k: (k[0], k[1] or ""))
    for knob, obj in others:
        name = f"{knob} ({obj})" if obj else knob
        rows.append(f'<tr data-knob="{esc(knob)}"><td><code>{esc(name)}</code></td><td class=num>–</td>'
                    f"<td class=num>{esc(t.on_server[(knob, obj)])}</td><td>no recommendation in force</td>"
                    "<td class=num>–</td><td></td></tr>")
    when = (f"The server's values were read by the drift check at {esc(t.checked_at)}."
            if t.checked_at else "The drift check has not read the server's values yet.")
    if not rows:
        return f"<p>No recommendation in force and no value read from the server yet. {when}</p>"
    note = ("" if t.in_force else
            "<p>No recommendation is in force: no stored session found a change that clears the minimum effect "
            "(or a re-validation withdrew it).</p>")
    return (note + "<div class=scroll><table><tr><th>setting</th><th class=num>accepted recommendation</th>"
            "<th class=num>on the server now</th><th>state</th><th class=num>measured improvement</th>"
            f"<th>session</th></tr>{''.join(rows)}</table></div><p class=meta>{when}</p>")


def _history(t: TargetPage, figures: Figures) -> str:
    entries = by_knob((s.id, s.started_at, s.decisions) for s in t.sessions)
    floor = min_effect(t.latest)[0] if t.latest is not None else DEFAULT_MIN_EFFECT
    body = []
    for key, ent in sorted(entries.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        if len(ent) < 2:
            continue
        body.append(figures.figure(
            f"<h4>{esc(key[0])}{f' ({esc(key[1])})' if key[1] else ''}</h4>",
            history_figure(key, ent, floor, figures.next_no()),
            f"{len(ent)} stored sessions, oldest first. Top: the value then (square) and the recommendation "
            "(diamond: change, circle: keep) with its near-optimal range. Bottom: the improvement's 95 % interval, "
            "where one was measured."))
    if not body:
        n = len(t.sessions)
        return (f"<p>{n} stored session{'s' * (n != 1)}: a knob's history is drawn once two sessions "
                "have measured it.</p>")
    return "".join(body)
