"""The WAL family's section of the HTML report: throughput of concurrent inserts per client count and transaction
size, and where the load backends waited (WAL insertion locks, write, flush, buffer mapping)."""

from __future__ import annotations

import math

from tuner.emit.svg import (
    BLACK, BLUE, GREEN, ORANGE, PURPLE, SKY, VERMILLION, YELLOW, Categories, Figures, Linear, Svg, W, esc, finite,
)
from tuner.families.wal_sections import Report as Section
from tuner.model import Report


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
                x.tps_recommended for x in wal.wal_scaling) else "") + "."))
    if wal.wal_contention:
        body.append(figures.figure("", wal_contention_figure(report, figures.next_no()),
            "Where load backends spent their time, as shares of sampled backend states: waiting for a WAL "
            "insertion lock, for a WAL write, for a WAL flush (sync), for WAL buffer mapping; the light grey "
            "rest is everything else (running, waiting for the client, other waits)."))
    if wal.wal_summary:
        body.append(f"<p>{esc(wal.wal_summary)}</p>")
    return [("wal", "WAL", "".join(body))]


def _panel_grid(shapes: list[int]) -> tuple[float, int]:
    """One panel per transaction size, two to a row: (a panel's width, the number of rows)."""
    return (W - 20) / max(1, min(2, len(shapes))), math.ceil(len(shapes) / 2)


def wal_scaling_figure(report: Report, figno: int) -> str:
    wal = Section.of(report, "wal")
    shapes = sorted({s.rows_per_tx for s in wal.wal_scaling})
    panel_w, rows_n = _panel_grid(shapes)
    panel_h = 250.0
    svg = Svg("wal-scaling", 0, "WAL: transactions per second by client count",
              esc("one panel per transaction size; today's settings (and the recommended ones, where measured)"))
    any_rec = any(s.tps_recommended for s in wal.wal_scaling)
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
            svg.polyline(line, stroke=colour, dash=dash, width=2)
            for s in pts:
                v = finite(getattr(s, attr))
                if v is None:
                    continue
                svg.marker(shape_name, x(s.clients), y(v), colour, cls="pt wal",
                           title=esc(f"{s.clients} clients, {shape} rows/tx: {v:.0f} TPS"
                                     f" ({'today' if attr == 'tps_current' else 'recommended'})"))
                if attr == "tps_current":
                    svg.text(x(s.clients), y(v) - 9, f"{v:.0f}", anchor="middle", cls="small")
    items = [("circle", BLUE, True, "today's settings")]
    if any_rec:
        items.append(("diamond", GREEN, True, "recommended settings"))
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
