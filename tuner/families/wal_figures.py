"""The WAL family's section of the HTML report: throughput of concurrent inserts per client count and transaction
size, and where the load backends waited (WAL insertion locks, write, flush, buffer mapping)."""

from __future__ import annotations

import math

from tuner.emit.svg import (
    BLACK, BLUE, GREEN, ORANGE, PURPLE, SKY, VERMILLION, YELLOW, Categories, Figures, Linear, Svg, W, esc, finite,
)
from tuner.families.wal_sections import Report as Section
from tuner.report.model import Report


def html_sections(report: Report, figures: Figures) -> list[tuple[str, str, str]]:
    """The report's WAL measurements as (id, heading, body HTML); nothing when the report has none."""
    wal = Section.of(report, "wal")
    if not (wal.wal_scaling or wal.wal_contention or wal.wal_summary):
        return []
    body: list[str] = []
    if wal.wal_scaling:
        body.append(figures.figure("", wal_scaling_figure(report, figures.next_no()),
            "Throughput of concurrent INSERT transactions into a scratch table, per client count and transaction "
            "size, measured under today's settings" + (" and the recommended ones" if any(
                x.tps_recommended for x in _wal(report).wal_scaling) else "") + ". " + _readings_note(report)))
    if _wal(report).wal_contention:
        body.append(figures.figure("", wal_contention_figure(report, figures.next_no()),
            "Where load backends spent their time, as shares of sampled backend states: waiting for a WAL "
            "insertion lock, for a WAL write, for a WAL flush (sync), for WAL buffer mapping; the light grey "
            "rest is everything else (running, waiting for the client, other waits)."))
    summary = f"<p>{esc(_wal(report).wal_summary)}</p>" if _wal(report).wal_summary else ""
    if not body:
        return [("wal", "WAL", summary)]
    # The figures are context, not the decision: folded unless a WAL setting is to change, so the page's first
    # screens say what to do (issue #47); the summary sentence stays in view.
    knobs = {k for t in report.trials if t.family == "wal" for k in t.config}
    change = any(r.decision == "change" and r.knob in knobs for r in report.recommendations)
    n = len(body)
    return [("wal", "WAL", summary + f"<details{' open' if change else ''}><summary>throughput and waits per "
             f"client count ({n} figure{'s' * (n != 1)})</summary>{''.join(body)}</details>")]


def _single(report: Report) -> bool:
    return all(s.readings == 1 for s in _wal(report).wal_scaling)


def _reading_words(report: Report) -> str:
    secs = {s.reading_s for s in _wal(report).wal_scaling if s.reading_s}
    return f"one {secs.pop():g}-second reading" if len(secs) == 1 else "one reading"


def repeat_spread(report: Report) -> tuple[int, float, float, float, str] | None:
    """The most repeated configuration among the WAL confirmation's readings: (readings, coefficient of variation
    of their TPS, lowest TPS, highest TPS, the load they ran), or None when no configuration was read 3+ times."""
    groups: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for t in report.trials:
        tps = t.metrics.get("tps")
        if t.family != "wal" or t.phase != "confirm" or t.status != "ok" or not tps or not math.isfinite(tps):
            continue
        load = f"{t.metrics.get('clients', 0):g} clients x {t.metrics.get('rows_per_tx', 0):g} rows"
        groups.setdefault((repr(sorted(t.config.items())), load), []).append((tps, load))
    best = max(groups.values(), key=len, default=[])
    if len(best) < 3:
        return None
    vals = [v for v, _ in best]
    mean = sum(vals) / len(vals)
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
    return len(vals), sd / mean, min(vals), max(vals), best[0][1]


def _readings_note(report: Report) -> str:
    """Says how many readings stand behind each point, and how far repeated readings of one setting scattered."""
    if not _single(report):
        return f"Each point stands for up to {max(x.readings for x in _wal(report).wal_scaling)} readings."
    text = (f"Each point is {_reading_words(report)}, not repeated (hollow markers): a difference between two "
            "points is a difference between two single runs.")
    spread = repeat_spread(report)
    if spread is not None:
        n, cv, lo, hi, load = spread
        text += (f" For scale: {n} repeated readings of one setting in the confirmation ({esc(load)} per "
                 f"transaction) varied by {cv:.0%} (coefficient of variation; {lo:.0f}–{hi:.0f} TPS).")
    return text + " The decisions above rest on the paired confirmations, not on this curve."


def _wal(report: Report) -> Section:
    return Section.of(report, "wal")


def _panel_grid(shapes: list[int]) -> tuple[float, int]:
    """One panel per transaction size, two to a row: (a panel's width, the number of rows)."""
    return (W - 20) / max(1, min(2, len(shapes))), math.ceil(len(shapes) / 2)


def wal_scaling_figure(report: Report, figno: int) -> str:
    wal = Section.of(report, "wal")
    shapes = sorted({s.rows_per_tx for s in wal.wal_scaling})
    panel_w, rows_n = _panel_grid(shapes)
    panel_h = 250.0
    single = _single(report)
    svg = Svg("wal-scaling", 0, "WAL: transactions per second by client count"
              + (f" ({_reading_words(report)} per point)" if single else ""),
              esc("one panel per transaction size; today's settings (and the recommended ones, where measured)"
                  + ("; each point a single run, not repeated" if single else "")))
    any_rec = any(s.tps_recommended for s in _wal(report).wal_scaling)
    for i, shape in enumerate(shapes):
        ox, oy = 10 + (i % 2) * panel_w, (i // 2) * panel_h
        pts = [s for s in wal.wal_scaling if s.rows_per_tx == shape]
        clients = sorted({s.clients for s in pts})
        x = Categories(clients, ox + 70, ox + panel_w - 20)
        tps = [v for s in pts for v in (s.tps_current, s.tps_recommended) if v is not None]
        y = Linear(0, max(tps) * 1.1 if tps else 1.0, oy + panel_h - 60, oy + 34)
        svg.text(ox + 70, oy + 18, esc(f"{shape} rows per transaction"), weight="700")
        for py, text in y.ticks():
            svg.line(ox + 70, py, ox + panel_w - 20, py, stroke="#ececec")
            svg.text(ox + 62, py + 4, text, anchor="end", cls="tick")
        svg.line(ox + 70, oy + 34, ox + 70, oy + panel_h - 60, stroke="#444")
        svg.text(ox + 18, oy + panel_h / 2 - 20, "TPS", anchor="middle", cls="axis-label", rotate=-90)
        svg.axis_x(x, oy + panel_h - 60, "clients")
        for attr, colour, shape_name, dash in (("tps_current", BLUE, "circle", ""), ("tps_recommended", GREEN, "diamond", "6 4")):
            line = [(x(s.clients), y(getattr(s, attr))) for s in sorted(pts, key=lambda s: s.clients)
                    if finite(getattr(s, attr)) is not None]
            # single runs: a thin line, so the eye reads points, not a measured curve
            svg.polyline(line, stroke=colour, dash=dash, width=1 if single else 2)
            for s in pts:
                v = finite(getattr(s, attr))
                if v is None:
                    continue
                svg.marker(shape_name, x(s.clients), y(v), colour, cls="pt wal", filled=not single,
                           title=esc(f"{s.clients} clients, {shape} rows/tx: {v:.0f} TPS"
                                     f" ({'today' if attr == 'tps_current' else 'recommended'}"
                                     f"{', one reading' if s.readings == 1 else f', {s.readings} readings'})"),
                           data={"readings": str(s.readings)})
                if attr == "tps_current":
                    svg.text(x(s.clients), y(v) - 9, f"{v:.0f}", anchor="middle", cls="small")
    one = " (one reading each)" if single else ""
    items = [("circle", BLUE, not single, f"today's settings{one}")]
    if any_rec:
        items.append(("diamond", GREEN, not single, f"recommended settings{one}"))
    svg.height = svg.legend(80, rows_n * panel_h + 4, items)
    return svg.markup(f"fig{figno}")


WAITS = (
    ("wal_insert_wait_share", "WAL insert locks", VERMILLION),
    ("wal_write_wait_share", "WAL write", BLUE),
    ("wal_sync_wait_share", "WAL sync (flush)", ORANGE),
    ("wal_buf_mapping_wait_share", "WAL buffer mapping", PURPLE),
)


def wal_contention_figure(report: Report, figno: int) -> str:
    wal = Section.of(report, "wal")
    shapes = sorted({s.rows_per_tx for s in wal.wal_contention})
    panel_w, rows_n = _panel_grid(shapes)
    panel_h = 260.0
    svg = Svg("wal-contention", 0, "WAL: where load backends waited, by client count",
              esc("stacked shares of sampled backend states per client count; the rest is everything else "
                  "(running, client, other waits)"))
    for i, shape in enumerate(shapes):
        ox, oy = 10 + (i % 2) * panel_w, (i // 2) * panel_h
        pts = sorted((s for s in wal.wal_contention if s.rows_per_tx == shape), key=lambda s: s.clients)
        x = Categories([s.clients for s in pts], ox + 70, ox + panel_w - 20)
        y = Linear(0, 1, oy + panel_h - 60, oy + 34, count=4)
        svg.text(ox + 70, oy + 18, esc(f"{shape} rows per transaction"), weight="700")
        for py, text in y.ticks():
            svg.line(ox + 70, py, ox + panel_w - 20, py, stroke="#ececec")
            svg.text(ox + 62, py + 4, f"{float(text):.0%}" if text != "–" else text, anchor="end", cls="tick")
        svg.line(ox + 70, oy + 34, ox + 70, oy + panel_h - 60, stroke="#444")
        svg.text(ox + 18, oy + panel_h / 2 - 20, "share of backend time", anchor="middle", cls="axis-label",
                 rotate=-90)
        bw = min(46.0, x.band * 0.7)
        for s in pts:
            cx, acc = x(s.clients), 0.0
            for attr, name, colour in WAITS:
                v = finite(getattr(s, attr))
                if not v or v <= 0:
                    continue
                v = min(v, 1 - acc)
                y0, y1 = y(acc), y(acc + v)
                svg.rect(cx - bw / 2, y1, bw, y0 - y1, fill=colour, stroke="#ffffff", cls="seg",
                         title=esc(f"{s.clients} clients, {shape} rows/tx: {name} {v:.0%}"))
                if y0 - y1 >= 13:
                    light = colour in (ORANGE, SKY, YELLOW)
                    svg.text(cx, (y0 + y1) / 2 + 4, f"{v:.0%}", anchor="middle", cls="small",
                             fill=BLACK if light else "#ffffff")
                acc += v
            if acc < 1:
                svg.rect(cx - bw / 2, y(1), bw, y(acc) - y(1), fill="#eeeeee", stroke="#ffffff", cls="seg",
                         title=esc(f"{s.clients} clients, {shape} rows/tx: everything else {1 - acc:.0%}"))
        svg.axis_x(x, oy + panel_h - 60, "clients")
    items = [("square", colour, True, esc(name)) for attr, name, colour in WAITS
             if any(finite(getattr(s, attr)) for s in wal.wal_contention)]
    items.append(("square", "#dddddd", True, "everything else"))
    svg.height = svg.legend(80, rows_n * panel_h + 4, items)
    return svg.markup(f"fig{figno}")
