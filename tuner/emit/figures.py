"""The HTML report's figures of what every family measures: each search's probes (one knob, or two jointly),
each paired confirmation, the effects against the minimum effect, and a knob's recommendations over sessions.
Only what the report holds is drawn: the optimiser's model (its curve and band) is not stored, so no figure shows
one. A family's own measurements (devices, WAL) are drawn by the family (its ``html_sections``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tuner.emit import wording
from tuner.emit.evidence import Confirmation, Search, knob_label, point_data, point_kind, point_title
from tuner.emit.svg import (
    BLACK,
    GREEN,
    GREY,
    ORANGE,
    STYLE,
    VIRIDIS,
    W,
    Categories,
    Linear,
    Log2p1,
    LogRatio,
    Svg,
    as_value,
    esc,
    finite,
    num,
    ratio,
    short,
    knob_scale,
)
from tuner.report.model import Recommendation


def _decision_label(r: Recommendation | None, value: Any) -> tuple[str, str]:
    """(label, colour) of the recommendation's line."""
    if r is None:
        return f"candidate {value}", GREY
    if r.decision == "change":
        return f"recommended {value}", GREEN
    return (f"candidate {value} — not enough: keep today's", GREY) if str(r.recommended) != str(r.current) else (
        f"today {value} — keep", GREY)


def search_1d(g: Search, knob: str, figno: int, *, unit: str) -> str:
    """One knob of a search: every probe's time (in ``unit``) over the knob's values."""
    plot_trials = list(g.trials)
    conf_trials = [(c, i, t) for c in g.confirmations for i, t in enumerate(c.trials)]
    all_trials = plot_trials + [t for _, _, t in conf_trials]
    missing = [t for t in all_trials if point_kind(t) in ("failed", "rejected")]
    rec, today, cand = g.rec(knob), g.today(knob), g.candidate(knob)
    values: list[Any] = [as_value(t.config[knob]) for t in all_trials if knob in t.config]
    values += [v for v in (today, cand) if v is not None]
    if rec is not None and rec.near_optimal:
        values += list(rec.near_optimal)
    left, right, top = 78.0, W - 24.0, 58.0
    strip = 26.0 if missing else 0.0
    bottom = 300.0
    x = knob_scale(values, left, right)
    oks = [v for t in all_trials if point_kind(t) not in ("failed", "rejected") for v in [finite(t.value)] if v is not None]
    y = Linear(0, max(oks) * 1.05 if oks else 1.0, bottom, top + strip + 6)
    where = f" on {g.object}" if g.object else ""
    svg = Svg("search", 0, esc(f"{knob}{where}: every probe's time"),
              esc(f"{len(plot_trials)} search probes and {len(conf_trials)} confirmation trials of {knob}; lower is "
                  "better"))
    # near-optimal band, then today's and the recommended value (labels above the plot, on two rows)
    if rec is not None and rec.near_optimal:
        lo, hi = rec.near_optimal
        x0, x1 = x(as_value(lo)), x(as_value(hi))
        svg.rect(x0 - 2, top, x1 - x0 + 4, bottom - top, fill=GREEN, opacity=0.13, cls="near-optimal",
                 title=esc(f"near-optimal: {lo}..{hi}"))
    svg.axis_y(y, left, unit.split(" (")[0], grid_to=right)
    svg.reserve(0, 0, W, top - 36)  # keep labels off the title row
    for value, (text, colour), dash, row in (
        (today, (f"today {today}", ORANGE), "6 4", top - 6),
        (cand, _decision_label(rec, cand), "", top - 24),
    ):
        if value is None or (value == today and row == top - 24 and str(cand) == str(today)):
            continue
        px = x(value)
        svg.line(px, top - 2, px, bottom, stroke=colour, width=2, dash=dash, cls="marker-line")
        anchor = "end" if px > (left + right) / 2 else "start"
        dx = -4 if anchor == "end" else 4
        svg.label(px + dx, row, esc(text), len(text), anchor=anchor, cls="line-label", fill=colour if colour != ORANGE else "#8a5a00",
                  candidates=[(px + dx, row - 16, anchor), (px - dx, row, "start" if anchor == "end" else "end")])
    if strip:
        svg.rect(left, top, right - left, strip, fill="#f6f6f6")
        svg.text(left + 4, top + strip / 2 + 4, "no value", cls="small", fill=GREY)
    # points: search probes, then the confirmation trials around their two values (spread sideways so the
    # spread of the measurements shows)
    for t in plot_trials:
        kind = point_kind(t)
        px = x(as_value(t.config[knob]))
        py = top + strip / 2 if kind in ("failed", "rejected") else y(t.value)
        svg.styled(kind, px, py, cls="pt search", title=point_title(t, [knob], unit), data=point_data(t))
    for c, i, t in conf_trials:
        kind = point_kind(t)
        px = x(as_value(t.config[knob])) + ((c.slots[i] % 7) - 3) * 1.6
        py = top + strip / 2 if kind in ("failed", "rejected") else y(t.value)
        svg.styled(kind, px, py, cls="pt confirm", title=point_title(t, [knob], unit), data=point_data(t), size=3.6)
    log_note = "log scale, 0 set apart" if isinstance(x, Log2p1) else ""
    svg.axis_x(x, bottom, esc(knob), note=log_note)
    present = {point_kind(t) for t in all_trials}
    items = [(STYLE[k][0], STYLE[k][1], STYLE[k][2], esc(STYLE[k][3])) for k in STYLE if k in present]
    if rec is not None and rec.near_optimal:
        items.append(("band", GREEN, True, "near-optimal range"))
    end = svg.legend(left, bottom + 60, items)
    svg.height = end
    return svg.markup(f"fig{figno}")


def _median(values: Sequence[float]) -> float:
    v = sorted(values)
    return (v[len(v) // 2] + v[(len(v) - 1) // 2]) / 2


def _viridis(f: float) -> str:
    f = min(1.0, max(0.0, f)) * (len(VIRIDIS) - 1)
    i = min(int(f), len(VIRIDIS) - 2)
    t = f - i
    a, b = VIRIDIS[i], VIRIDIS[i + 1]
    mix = [round(int(a[j:j + 2], 16) * (1 - t) + int(b[j:j + 2], 16) * t) for j in (1, 3, 5)]
    return "#" + "".join(f"{c:02x}" for c in mix)


def search_2d(g: Search, kx: str, ky: str, figno: int, *, unit: str) -> str:
    """Two knobs searched jointly: every probe at its place, coloured by its time (in ``unit``)."""
    trials = list(g.trials)
    left, right, top, bottom = 84.0, W - 155.0, 30.0, 380.0
    today = {k: g.today(k) for k in (kx, ky)}
    cand = {k: g.candidate(k) for k in (kx, ky)}
    vx: list[Any] = [as_value(t.config[kx]) for t in trials] + [v for v in (today[kx], cand[kx]) if v is not None]
    vy: list[Any] = [as_value(t.config[ky]) for t in trials] + [v for v in (today[ky], cand[ky]) if v is not None]
    x, y = knob_scale(vx, left, right), knob_scale(vy, bottom, top)
    oks = [float(t.value) for t in trials if point_kind(t) == "search"]  # type: ignore[arg-type]
    vmin, vmax = (min(oks), max(oks)) if oks else (1.0, 2.0)
    # Colour by log(time) from the fastest to the 90th percentile, slower ones all in the last colour: one very
    # slow probe (readahead 0, a cold first probe) would otherwise paint every other point alike. The numbers
    # beside the points carry the exact times.
    ranked = sorted(oks) or [1.0, 2.0]
    vcap = ranked[min(len(ranked) - 1, math.ceil(0.9 * (len(ranked) - 1)))] if len(ranked) > 4 else vmax
    capped = vcap < vmax
    lmin, lspan = math.log(max(vmin, 1e-9)), (math.log(max(vcap, 1e-9)) - math.log(max(vmin, 1e-9))) or 1.0

    def shade(v: float) -> str:
        return _viridis((math.log(max(v, 1e-9)) - lmin) / lspan)

    where = f" on {g.object}" if g.object else ""
    svg = Svg("search", 0, esc(f"{kx} × {ky}{where}: every search probe's time"),
              esc(f"{len(trials)} search probes of a joint search; the colour and the number beside each point are "
                  "its time, lower is better"))
    rx, ry = g.rec(kx), g.rec(ky)
    if rx is not None and ry is not None and rx.near_optimal and ry.near_optimal:
        x0, x1 = x(as_value(rx.near_optimal[0])), x(as_value(rx.near_optimal[1]))
        y0, y1 = y(as_value(ry.near_optimal[1])), y(as_value(ry.near_optimal[0]))
        svg.rect(x0 - 3, y0 - 3, x1 - x0 + 6, y1 - y0 + 6, fill=GREEN, opacity=0.13, cls="near-optimal")
    elif rx is not None and rx.near_optimal:
        x0, x1 = x(as_value(rx.near_optimal[0])), x(as_value(rx.near_optimal[1]))
        svg.rect(x0 - 3, top, x1 - x0 + 6, bottom - top, fill=GREEN, opacity=0.13, cls="near-optimal",
                 title=esc(f"near-optimal {kx}: {rx.near_optimal[0]}..{rx.near_optimal[1]}"))
    svg.axis_y(y, left, esc(ky))
    svg.axis_x(x, bottom, esc(kx), note="both axes log scale, 0 set apart" if isinstance(x, Log2p1) else "")
    # points: one per probe; repeated configurations are spread around their place
    seen: dict[tuple[str, str], int] = {}
    places: dict[tuple[str, str], list[float]] = {}
    for t in trials:
        key = (str(t.config[kx]), str(t.config[ky]))
        n = seen.get(key, 0)
        seen[key] = n + 1
        px, py = x(as_value(t.config[kx])), y(as_value(t.config[ky]))
        if n:  # a spiral (the golden angle): the more often a configuration was probed, the wider its cluster
            angle, radius = n * 2.4, 3.2 * math.sqrt(n)
            px, py = px + radius * math.cos(angle), py + radius * math.sin(angle)
        kind = point_kind(t)
        title = point_title(t, [kx, ky], unit)
        if kind == "search":
            colour = shade(float(t.value))  # type: ignore[arg-type]
            svg.marker("circle", px, py, colour, cls="pt search", title=title, data=point_data(t), size=6)
            places.setdefault(key, []).append(float(t.value))  # type: ignore[arg-type]
        else:
            svg.styled(kind, px, py, cls="pt search", title=title, data=point_data(t), size=5)
    # labels: first the places of the points and the colour key are kept free, then today's and the candidate's
    # rings are labelled, then each place with its fastest time (fastest places first)
    svg.reserve(right + 26, top, W, bottom)  # the colour key
    for key in places:
        px, py = x(as_value(key[0])), y(as_value(key[1]))
        r = 6 + 3.2 * math.sqrt(seen.get(key, 1) - 1)
        svg.reserve(px - r, py - r, px + r, py + r)
    cand_word = "recommended" if rx is not None and rx.decision == "change" else "candidate"
    for marker_key, text, colour in (("today", "today", ORANGE), ("cand", cand_word, GREEN)):
        pt = today if marker_key == "today" else cand
        if pt[kx] is None or pt[ky] is None or (marker_key == "cand" and pt == today):
            continue
        px, py = x(pt[kx]), y(pt[ky])
        svg.add(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="11" fill="none" stroke="{colour}" stroke-width="2.5" '
                f'stroke-dasharray="{"4 3" if marker_key == "today" else ""}"/>')
        svg.reserve(px - 11, py - 11, px + 11, py + 11)
        label = f"{text} ({pt[kx]}, {pt[ky]})"
        svg.label(px, py - 15, esc(label), len(label), anchor="middle", cls="line-label",
                  fill="#8a5a00" if marker_key == "today" else "#00664a",
                  candidates=[(px, py + 26, "middle"), (px + 8, py - 15, "end"), (px + 8, py + 26, "end"),
                              (px - 8, py - 15, "start"), (px - 8, py + 26, "start"), (px + 14, py + 4, "start"),
                              (px - 14, py + 4, "end"), (px, py - 30, "middle"), (px, py + 41, "middle")])
    for key, vals in sorted(places.items(), key=lambda kv: _median(kv[1])):
        px, py = x(as_value(key[0])), y(as_value(key[1]))
        text = num(_median(vals)) + (f" (median of {len(vals)})" if len(vals) > 1 else "")
        r = 9 + 3.2 * math.sqrt(len(vals) - 1)
        svg.label(px + r, py + 4, esc(text), len(text), size=11, cls="small",
                  candidates=[(px - r, py + 4, "end"), (px, py - r - 2, "middle"), (px, py + r + 10, "middle"),
                              (px + r - 2, py - r, "start"), (px + r - 2, py + r + 8, "start"),
                              (px - r + 2, py - r, "end"), (px - r + 2, py + r + 8, "end")])
    # colour key: faster (dark) to slower (light), as small rects (no gradient: nothing to reference)
    kx0, ky0, kh = right + 30, top + 20, 200.0
    svg.text(kx0, ky0 - 8, esc(unit.split(" (")[0]), cls="small")
    steps = 24
    for i in range(steps):
        svg.rect(kx0, ky0 + kh * i / steps, 16, kh / steps + 0.5, fill=_viridis(i / (steps - 1)))
    svg.text(kx0 + 22, ky0 + 8, f"{num(vmin)} fastest", cls="small")
    mid = math.exp(lmin + lspan / 2)
    if vcap > vmin:
        svg.text(kx0 + 22, ky0 + kh / 2 + 4, f"{num(mid)}", cls="small")
    svg.text(kx0 + 22, ky0 + kh, f"≥ {num(vcap)}" if capped else f"{num(vmax)} slowest", cls="small")
    if capped:
        svg.text(kx0 + 22, ky0 + kh + 15, f"(slowest {num(vmax)})", cls="note")
    svg.text(kx0, ky0 + kh + 36, "log colour scale", cls="note")
    missing = {point_kind(t) for t in trials} & {"failed", "rejected"}
    items = [(STYLE[k][0], STYLE[k][1], STYLE[k][2], esc(STYLE[k][3])) for k in STYLE if k in missing]
    if any(svg_part.find("near-optimal") >= 0 for svg_part in svg.parts):
        items.append(("band", GREEN, True, "near-optimal range"))
    items.append(("circle", ORANGE, False, "today (dashed ring)"))
    if cand[kx] is not None and cand != today:
        items.append(("circle", GREEN, False, f"{cand_word} (solid ring)"))
    end = svg.legend(left, bottom + 60, items) if items else bottom + 50
    svg.height = end
    return svg.markup(f"fig{figno}")


def confirmation_figure(c: Confirmation, floor: float, figno: int, *, unit: str) -> str:
    """A confirmation's paired trials (times in ``unit``) and their ratios against the minimum effect ``floor``."""
    slots = max([len(c.pairs)] + [s + 1 for s in c.slots] + [1])
    left, right = 84.0, W - 215.0
    xs = Categories(range(1, slots + 1), left, right)
    a_top, a_bottom = 30.0, 200.0
    oks = [float(t.value) for t in c.trials if point_kind(t) in ("baseline", "candidate")]  # type: ignore[arg-type]
    failed = [t for t in c.trials if point_kind(t) in ("failed", "rejected")]
    strip = 24.0 if failed else 0.0
    lo, hi = (min(oks), max(oks)) if oks else (0.0, 1.0)
    pad = (hi - lo) * 0.15 or hi * 0.05 or 1
    ya = Linear(max(0.0, lo - pad), hi + pad, a_bottom, a_top + strip + 6, nice=False)
    changed = ", ".join(f"{k} {c.baseline[k]} → {c.candidate[k]}" for k in c.changed) if c.baseline and c.candidate else ""
    svg = Svg("confirmation", 0, esc(f"confirmation: {changed or 'baseline against candidate'}"),
              esc(f"{len(c.trials)} confirmation trials in {len(c.pairs)} pairs; top: each pair's two times; "
                  "bottom: each pair's ratio baseline / candidate and the improvement with its 95 % interval"))
    svg.axis_y(ya, left, esc(unit.split(" (")[0]), grid_to=right)
    if strip:
        svg.rect(left, a_top, right - left, strip, fill="#f6f6f6")
        svg.text(left + 4, a_top + strip / 2 + 4, "no value", cls="small", fill=GREY)
    pair_of = {id(t): n for n, (b, k) in enumerate(c.pairs) for t in (b, k)}
    for n, (b, k) in enumerate(c.pairs):
        px = xs(n + 1)
        svg.line(px - 7, ya(b.value), px + 7, ya(k.value), stroke="#9a9a9a", width=1.2)
    for i, t in enumerate(c.trials):
        kind = point_kind(t)
        slot = pair_of.get(id(t), c.slots[i])
        px = xs(slot + 1) + (-7 if t.arm == "baseline" else 7)
        py = a_top + strip / 2 if kind in ("failed", "rejected") else ya(t.value)
        svg.styled(kind, px, py, cls="pt confirm", title=point_title(t, c.changed or list(t.config), unit),
                   data=point_data(t))
    # bottom panel: the ratios, the improvement and its interval, the minimum effect
    b_top, b_bottom = a_bottom + 40, a_bottom + 190
    e = c.recs[0].effect if c.recs and c.recs[0].effect else None
    rs = c.ratios
    span = rs + [1.0, floor] + ([e.ci95[0], e.ci95[1]] if e else [])
    yb = LogRatio(span, b_bottom, b_top)
    svg.text(left, b_top - 12, "baseline time / candidate time per pair (above 1: the candidate was faster)",
             cls="small")
    end = right + 62
    svg.axis_y(yb, left, "ratio", grid_to=end)
    svg.rect(left, yb(max(floor, math.exp(yb.hi))), end - left, yb(floor) - yb(math.exp(yb.hi)),
             fill=GREEN, opacity=0.08)
    svg.line(left, yb(1.0), end, yb(1.0), stroke="#444", width=1.2)
    svg.line(left, yb(floor), end, yb(floor), stroke=BLACK, width=1.5, dash="6 4", cls="min-effect")
    svg.label(end + 6, yb(floor) - 2, esc(f"minimum effect {floor:g}×"), 20, size=12, cls="small",
              candidates=[(end + 6, yb(floor) - 14, "start")])
    svg.label(end + 6, yb(1.0) + 12, "no difference", 13, size=12, cls="small",
              candidates=[(end + 6, yb(1.0) + 24, "start")])
    for n, r in enumerate(rs):
        svg.marker("circle", xs(n + 1), yb(r), BLACK, size=3.6, cls="pair",
                   title=esc(f"pair {n + 1}: {ratio(r)}"))
    if e is not None:
        sx = right + 35
        svg.line(sx, yb(e.ci95[0]), sx, yb(e.ci95[1]), stroke=GREEN if c.recs[0].decision == "change" else BLACK,
                 width=2.5)
        for v in e.ci95:
            svg.line(sx - 6, yb(v), sx + 6, yb(v), stroke=BLACK, width=1.5)
        svg.marker("diamond", sx, yb(e.improvement), GREEN if c.recs[0].decision == "change" else BLACK,
                   filled=c.recs[0].decision == "change", size=5,
                   title=esc(f"improvement {ratio(e.improvement)}, 95 % CI [{e.ci95[0]:.2f}, {e.ci95[1]:.2f}]"))
        svg.text(sx, b_bottom + 18, "all pairs", anchor="middle", cls="tick")
    elif c.improvement is not None:
        sx = right + 35
        svg.marker("diamond", sx, yb(c.improvement), BLACK, filled=False, size=5,
                   title=esc(f"geometric mean {ratio(c.improvement)}"))
        svg.text(sx, b_bottom + 18, "mean", anchor="middle", cls="tick")
    svg.axis_x(xs, b_bottom, "pair (in the order they ran: ABBA, BAAB, …)")
    present = {point_kind(t) for t in c.trials}
    items = [(STYLE[k][0], STYLE[k][1], STYLE[k][2], esc(STYLE[k][3])) for k in STYLE if k in present and k != "search"]
    change = bool(c.recs) and c.recs[0].decision == "change"
    items += [("circle", BLACK, True, "pair's ratio"),
              ("diamond", GREEN if change else BLACK, change, "improvement, 95 % CI (all pairs)"),
              ("dash", BLACK, True, "minimum effect")]
    svg.height = svg.legend(left, b_bottom + 60, items)
    return svg.markup(f"fig{figno}")


def effects_figure(recs: Sequence[Recommendation], floor: float, figno: int) -> str:
    rows = [r for r in recs if r.effect is not None]
    left, right = 262.0, W - 200.0
    row_h, top = 34.0, 40.0
    values = [1.0, floor] + [v for r in rows for v in (r.effect.ci95[0], r.effect.ci95[1], r.effect.improvement)]  # type: ignore[union-attr]
    x = LogRatio(values, left, right)
    bottom = top + row_h * len(rows)
    svg = Svg("effects", 0, "improvement of each confirmed candidate, with its 95 % interval",
              esc(f"{len(rows)} effects on a log scale; a change needs the whole interval above the minimum "
                  f"effect {floor:g}×"))
    hi_px = x(math.exp(x.hi))
    svg.rect(x(floor), top - 10, hi_px - x(floor), bottom - top + 10, fill=GREEN, opacity=0.10)
    svg.line(x(1.0), top - 10, x(1.0), bottom, stroke="#444", width=1.2)
    svg.line(x(floor), top - 10, x(floor), bottom, stroke=BLACK, width=1.5, dash="6 4", cls="min-effect")
    svg.text(x(floor) + 4, top - 16, esc(f"minimum effect {floor:g}× →"), cls="small")
    svg.text(x(1.0) - 4, top - 16, "← slower  | no difference", anchor="end", cls="small")
    for i, r in enumerate(rows):
        e = r.effect
        assert e is not None
        cy = top + row_h * (i + 0.5)
        if i % 2 == 0:
            svg.rect(8, cy - row_h / 2, W - 16, row_h, fill="#000000", opacity=0.03)
        label = wording.decided(r, knob_label(r), arrow="→")
        svg.text(left - 10, cy - 2, short(knob_label(r), 38), anchor="end", title=esc(label), cls="small",
                 weight="600")
        moved = f"{r.current} → {r.recommended}" if r.decision == "change" else wording.kept(r, why=False)
        svg.text(left - 10, cy + 12, short(moved, 38), anchor="end", cls="small")
        change = r.decision == "change"
        colour = GREEN if change else BLACK
        svg.line(x(e.ci95[0]), cy, x(e.ci95[1]), cy, stroke=colour, width=2.5)
        for v in e.ci95:
            svg.line(x(v), cy - 6, x(v), cy + 6, stroke=colour, width=1.5)
        svg.marker("diamond" if change else "circle", x(e.improvement), cy, colour, filled=change, size=5.5,
                   cls="effect", title=esc(f"{ratio(e.improvement)} [{e.ci95[0]:.2f}, {e.ci95[1]:.2f}], "
                                           f"{e.n_pairs} pairs"))
        verdict = "CHANGE" if change else "keep"
        svg.text(right + 14, cy + 4, f"{ratio(e.improvement)} [{e.ci95[0]:.2f}, {e.ci95[1]:.2f}] "
                 f'<tspan font-weight="700">{verdict}</tspan>', cls="small")
    svg.axis_x(x, bottom + 6, "improvement: baseline time / candidate time", note="log scale")
    svg.height = svg.legend(left, bottom + 64, [
        ("diamond", GREEN, True, "change: the interval clears the minimum effect"),
        ("circle", BLACK, False, "keep")])
    return svg.markup(f"fig{figno}")



def history_figure(key: tuple[str, str | None], entries: list[tuple[str, str, dict[str, Any]]], floor: float,
                   figno: int) -> str:
    """One knob over sessions: ``entries`` are (session id, started_at, decision dict), oldest first."""
    knob, obj = key
    left, right = 84.0, W - 24.0
    labels = [f"{sid[:6]}" for sid, _, _ in entries]
    x = Categories(range(len(entries)), left, right)
    values: list[Any] = []
    for _, _, d in entries:
        values += [as_value(d.get(k)) for k in ("current", "recommended") if d.get(k) is not None]
        if d.get("near_optimal"):
            values += [as_value(v) for v in d["near_optimal"]]
    a_top, a_bottom = 30.0, 170.0
    y = knob_scale(values, a_bottom, a_top)
    name = f"{knob} ({obj})" if obj else knob
    svg = Svg("history", 0, esc(f"{name} over sessions"),
              esc(f"{len(entries)} sessions, oldest first: the recommended value (top) and the improvement's 95 % "
                  "interval (bottom)"))
    svg.axis_y(y, left, esc(knob), grid_to=right)
    for i, (sid, started, d) in enumerate(entries):
        px = x(i)
        near = d.get("near_optimal")
        if near and len(near) == 2:
            y0, y1 = y(as_value(near[0])), y(as_value(near[1]))
            svg.rect(px - 5, min(y0, y1) - 3, 10, abs(y0 - y1) + 6, fill=GREEN, opacity=0.18)
        if d.get("current") is not None:
            svg.marker("square", px - 14, y(as_value(d["current"])), ORANGE, filled=False, size=3.6, cls="pt history",
                       title=esc(f"{sid}: today {d['current']}"))
        if d.get("recommended") is not None:
            change = d.get("decision") == "change"
            svg.marker("diamond" if change else "circle", px, y(as_value(d["recommended"])),
                       GREEN if change else BLACK, filled=change, size=5, cls="pt history",
                       title=esc(f"{sid} ({started}): recommended {d['recommended']} ({d.get('decision')})"))
    b_top, b_bottom = a_bottom + 30, a_bottom + 150
    imps = [(i, d) for i, (_, _, d) in enumerate(entries)
            if finite(d.get("improvement")) is not None and d.get("ci95") and len(d["ci95"]) == 2
            and all(finite(v) for v in d["ci95"])]
    span = [1.0, floor] + [v for _, d in imps for v in (d["ci95"][0], d["ci95"][1], d["improvement"])]
    yb = LogRatio(span, b_bottom, b_top)
    svg.axis_y(yb, left, "improvement", grid_to=right)
    svg.line(left, yb(1.0), right, yb(1.0), stroke="#444", width=1.2)
    svg.line(left, yb(floor), right, yb(floor), stroke=BLACK, width=1.5, dash="6 4", cls="min-effect")
    svg.text(right - 2, yb(floor) - 5, esc(f"minimum effect {floor:g}×"), anchor="end", cls="small")
    for i, d in imps:
        px = x(i)
        change = d.get("decision") == "change"
        colour = GREEN if change else BLACK
        lo, hi = d["ci95"]
        svg.line(px, yb(lo), px, yb(hi), stroke=colour, width=2.5)
        svg.marker("diamond" if change else "circle", px, yb(d["improvement"]), colour, filled=change, size=5,
                   cls="effect", title=esc(f"{ratio(d['improvement'])} [{lo:.2f}, {hi:.2f}]"))
    for i, (sid, started, _) in enumerate(entries):
        svg.text(x(i), b_bottom + 18, esc(str(started)[:10]), anchor="middle", cls="tick")
        svg.text(x(i), b_bottom + 32, esc(labels[i]), anchor="middle", cls="tick note")
    svg.line(left, b_bottom, right, b_bottom, stroke="#444")
    svg.height = svg.legend(left, b_bottom + 56, [
        ("square", ORANGE, False, "today's value then"), ("diamond", GREEN, True, "recommended: change"),
        ("circle", BLACK, False, "recommended: keep"), ("band", GREEN, True, "near-optimal range")])
    return svg.markup(f"fig{figno}")
