"""The HTML report (``--format html``, report.html): what was measured and why the decision follows, as pictures.

One self-contained page: inline CSS and inline SVG, no scripts, fonts, images or links to anything outside it, so
it opens offline, in a mail attachment, from an artefact store, and prints. Sections: a one-paragraph summary;
the recommendations (the text report's table, with the commands that apply them); per search, every probed value
and the confirmation trials around today's value and the recommendation; per confirmation, every paired trial, the
per-pair ratios and the improvement's 95 % interval against the minimum effect; per device, raw O_DIRECT reads
against sequential-scan throughput; WAL throughput and wait shares per client count; and, given the stored
sessions of the same target (``history``), each knob's recommendation over sessions. Only what the report holds
is drawn: the optimiser's model (its curve and band) is not stored, so no figure shows one.

Why hand-written SVG and not matplotlib
---------------------------------------
matplotlib is a benchmark extra, not a runtime dependency: making it one would add it and its own dependencies
(pillow, fonttools, kiwisolver, contourpy, …: tens of MB) to every install, and its import (plus a font-cache
build on first use) to every run that writes report.html — which ``write_outputs`` does on every run with an output
directory. Its SVG also needs settings (``svg.fonttype = "none"``, no clip-path ids and ``url(#...)`` references,
no embedded fonts) before text stays text and the page stays self-contained. The figures here are scatter plots, interval whiskers and bars — a few
hundred lines of SVG — and writing them directly gives full control over what matters in a report built from
text from outside: every string passes through :func:`esc` (``html.escape`` of :func:`tuner.emit.quote.one_line`,
so a newline or a bidi override in a tablespace name shows as ``\\n`` / ``\\u202e`` and cannot break out of an
element or an attribute), every marker carries a ``<title>`` with its number, and the output is deterministic
(the same report gives the same bytes).

Conventions: the Okabe–Ito palette (safe for the common colour-vision deficiencies) and never colour alone — each
kind of point has its own marker shape and a legend entry, lines are labelled at their ends, bars carry their
numbers. Text is ``<text>``, not paths. Figures scale with the page (``viewBox``; a minimum width keeps them
legible on a phone, which then scrolls sideways) and do not break across printed pages.

Knob axes: a knob whose values span at least three octaves (effective_io_concurrency 0..1000, read_ahead_kb
0..16384, commit_delay, wal_writer_delay) is drawn on log2(1 + value), as the optimiser searches it, with 0 set
apart (two units below 1, behind an axis break): 0 is another mechanism ("off"), not a small value. Other integer
knobs are linear; string knobs (wal_compression) are categories.

The minimum effect is not a field of the report; every reason that comes with an effect states it ("... the
minimum effect 1.05x"), and that is where it is read from (1.05, the shipped policies' value, when no reason
says).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tuner import __version__
from tuner.emit import host as host_emit
from tuner.emit import quote, ranges, sql
from tuner.model import DeviceOut, Recommendation, Report, Trial

DEFAULT_MIN_EFFECT = 1.05
_MIN_EFFECT = re.compile(r"minimum effect (\d{1,3}(?:\.\d{1,6})?)x")

# Okabe & Ito (2008), "Color Universal Design": distinguishable with the common colour-vision deficiencies.
BLACK, ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILLION, PURPLE = (
    "#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")
GREY = "#6b6b6b"  # text and reference lines: 5.3:1 on white
# viridis (perceptually uniform, colour-blind safe, monotone in lightness: it survives greyscale printing)
VIRIDIS = ("#440154", "#414487", "#2a788e", "#22a884", "#7ad151", "#fde725")

W = 760  # every figure's viewBox width; the page scales it
CHAR = 6.6  # approximate width of one character of 12-px text, for placing labels

# What each kind of point looks like: (shape, colour, filled, legend text).
STYLE: dict[str, tuple[str, str, bool, str]] = {
    "search": ("circle", BLUE, True, "search probe"),
    "baseline": ("square", ORANGE, False, "confirmation: today's value"),
    "candidate": ("diamond", GREEN, False, "confirmation: candidate"),
    "failed": ("cross", VERMILLION, False, "failed (no value)"),
    "rejected": ("triangle", PURPLE, False, "rejected (cache not cold)"),
}


# --------------------------------------------------------------------------------------------------------------
# text


def esc(value: object) -> str:
    """Text from anywhere, for HTML text or a quoted attribute: on one line (control and format characters as
    visible escapes), with ``& < > " '`` escaped."""
    return html.escape(quote.one_line(value), quote=True)


def short(value: object, limit: int = 40) -> str:
    """:func:`esc` of ``value`` cut to ``limit`` characters (the whole text goes into a ``<title>``)."""
    text = quote.one_line(value)
    return html.escape(text if len(text) <= limit else text[: limit - 1] + "…", quote=True)


def finite(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def num(v: float | None) -> str:
    """Three significant digits, no exponent: 2818, 81.2, 0.602."""
    if v is None or not math.isfinite(v):
        return "–"
    a = abs(v)
    if a >= 100 or a == 0:
        return f"{v:.0f}"
    decimals = min(4, 2 - math.floor(math.log10(a)))
    return f"{v:.{decimals}f}"


def ratio(v: float) -> str:
    return f"{v:.2f}×"


def knob_label(r: Recommendation) -> str:
    return f"{r.knob} ({r.object})" if r.object else r.knob


def min_effect(report: Report) -> tuple[float, bool]:
    """The policy's minimum effect as the reasons state it, and whether one did (else the shipped default)."""
    for r in report.recommendations:
        m = _MIN_EFFECT.search(r.reason)
        if m and 1.0 <= float(m.group(1)) <= 100:
            return float(m.group(1)), True
    return DEFAULT_MIN_EFFECT, False


# --------------------------------------------------------------------------------------------------------------
# scales


def _nice_step(raw: float) -> float:
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    e = math.floor(math.log10(raw))
    f = raw / 10**e
    return (1 if f < 1.5 else 2 if f < 3 else 5 if f < 7 else 10) * 10.0**e


class Linear:
    """Numbers on a straight axis from ``lo`` to ``hi`` (pixels ``a`` to ``b``)."""

    def __init__(self, lo: float, hi: float, a: float, b: float, *, nice: bool = True, count: int = 5) -> None:
        if not hi > lo:
            lo, hi = (lo - 1, hi + 1) if lo != 0 else (0.0, 1.0)
        self.step = _nice_step((hi - lo) / count)
        if nice:
            lo, hi = math.floor(lo / self.step) * self.step, math.ceil(hi / self.step) * self.step
        self.lo, self.hi, self.a, self.b = lo, hi, a, b

    def __call__(self, v: Any) -> float:
        return self.a + (float(v) - self.lo) / (self.hi - self.lo) * (self.b - self.a)

    def ticks(self) -> list[tuple[float, str]]:
        out, k = [], math.ceil(self.lo / self.step - 1e-9)
        while k * self.step <= self.hi + 1e-9 * abs(self.hi or 1):
            v = k * self.step
            decimals = max(0, -math.floor(math.log10(self.step) + 1e-9))
            out.append((self(v), f"{v:.{decimals}f}" if abs(v) > 1e-12 else "0"))
            k += 1
        return out

    breaks: tuple[float, ...] = ()


class Log2p1:
    """Knob values on log2(1 + value), 0 set apart at -1 (as the optimiser places it), behind an axis break."""

    ZERO_Z = -1.0

    def __init__(self, values: Iterable[int], a: float, b: float, *, pad: float = 0.4) -> None:
        zs = [self.z(v) for v in values] or [0.0, 1.0]
        lo, hi = min(zs), max(zs)
        if hi - lo < 2:
            lo, hi = lo - 1, hi + 1
        self.lo, self.hi, self.a, self.b = lo - pad, hi + pad, a, b
        self.breaks = (self(0.5),) if lo <= self.ZERO_Z < hi and hi >= 1 else ()  # between 0 and 1

    @classmethod
    def z(cls, v: float) -> float:
        return cls.ZERO_Z if v <= 0 else math.log2(1 + v)

    def __call__(self, v: Any) -> float:
        return self.a + (self.z(float(v)) - self.lo) / (self.hi - self.lo) * (self.b - self.a)

    def ticks(self) -> list[tuple[float, str]]:
        ks = [k for k in range(0, 32) if self.lo <= math.log2(1 + 2**k) <= self.hi]
        stride = 1
        while len(ks) / stride > 8:
            stride += 1
        out = [(self(0), "0")] if self.lo <= self.ZERO_Z <= self.hi else []
        return out + [(self(2**k), str(2**k)) for k in ks if k % stride == 0]


class Categories:
    """Values as evenly spaced categories (strings, client counts, sessions)."""

    breaks: tuple[float, ...] = ()

    def __init__(self, values: Iterable[Any], a: float, b: float) -> None:
        self.cats: list[str] = []
        for v in values:
            if str(v) not in self.cats:
                self.cats.append(str(v))
        self.a, self.b = a, b

    def __call__(self, v: Any) -> float:
        n = max(1, len(self.cats))
        i = self.cats.index(str(v)) if str(v) in self.cats else 0
        return self.a + (i + 0.5) * (self.b - self.a) / n

    @property
    def band(self) -> float:
        return abs(self.b - self.a) / max(1, len(self.cats))

    def ticks(self) -> list[tuple[float, str]]:
        return [(self(c), esc(c)) for c in self.cats]


class LogRatio:
    """Ratios (baseline / candidate) on a log axis: 1 = no difference."""

    breaks: tuple[float, ...] = ()
    NICE = (0.1, 0.2, 0.25, 0.5, 0.67, 0.8, 0.9, 1.0, 1.05, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0)

    def __init__(self, values: Iterable[float], a: float, b: float) -> None:
        vs = [v for v in values if v > 0 and math.isfinite(v)] or [1.0]
        lo, hi = math.log(min(vs)), math.log(max(vs))
        if hi - lo < 0.1:
            lo, hi = lo - 0.05, hi + 0.05
        padding = (hi - lo) * 0.08
        self.lo, self.hi, self.a, self.b = lo - padding, hi + padding, a, b

    def __call__(self, v: float) -> float:
        return self.a + (math.log(max(v, 1e-9)) - self.lo) / (self.hi - self.lo) * (self.b - self.a)

    def ticks(self) -> list[tuple[float, str]]:
        inside = [t for t in self.NICE if self.lo <= math.log(t) <= self.hi]
        # 1 first, then outwards: a tick closer than a label's height (a vertical axis runs from a bottom ``a``
        # up to ``b``) or width to a kept one goes
        gap = 16 if self.a > self.b else 44
        kept: list[float] = []
        for t in sorted(inside, key=lambda t: (t != 1.0, abs(math.log(t)))):
            if all(abs(self(t) - self(k)) >= gap for k in kept):
                kept.append(t)
        return [(self(t), f"{t:g}×") for t in sorted(kept)]


def knob_scale(values: Iterable[Any], a: float, b: float) -> Linear | Log2p1 | Categories:
    """The axis for one knob's values: see the module docstring."""
    vals = [v for v in values if v is not None]
    ints = [v for v in vals if isinstance(v, int) and not isinstance(v, bool)]
    if not vals or len(ints) != len(vals):
        return Categories(vals, a, b)
    positive = [v for v in ints if v > 0]
    if min(ints) >= 0 and max(ints) >= 16 and positive and (0 in ints or (max(ints) + 1) / (min(positive) + 1) >= 8):
        return Log2p1(ints, a, b)
    return Linear(min(ints), max(ints), a, b)


def as_value(v: object) -> int | str:
    """A knob value from a report (int, or a string such as 'lz4'); a string of digits counts as a number."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return v
    text = str(v)
    return int(text) if re.fullmatch(r"-?[0-9]{1,12}", text) else text


# --------------------------------------------------------------------------------------------------------------
# SVG


@dataclass
class Box:
    x0: float
    y0: float
    x1: float
    y1: float

    def hits(self, other: Box) -> bool:
        return not (self.x1 <= other.x0 or other.x1 <= self.x0 or self.y1 <= other.y0 or other.y1 <= self.y0)


class Svg:
    """One figure: elements in drawing order, written as inline SVG with a title and description for screen
    readers. Labels placed with :meth:`label` avoid each other."""

    def __init__(self, kind: str, height: float, title: str, desc: str = "", *, width: float = W) -> None:
        self.kind, self.width, self.height, self.title, self.desc = kind, width, height, title, desc
        self.parts: list[str] = []
        self.boxes: list[Box] = []

    def add(self, part: str) -> None:
        self.parts.append(part)

    def text(self, x: float, y: float, body: str, *, anchor: str = "start", cls: str = "", title: str = "",
             weight: str = "", fill: str = "", rotate: float | None = None) -> None:
        """``body`` must already be escaped."""
        attrs = f' x="{x:.1f}" y="{y:.1f}"'
        if anchor != "start":
            attrs += f' text-anchor="{anchor}"'
        if cls:
            attrs += f' class="{cls}"'
        if weight:
            attrs += f' font-weight="{weight}"'
        if fill:
            attrs += f' fill="{fill}"'
        if rotate is not None:
            attrs += f' transform="rotate({rotate:g} {x:.1f} {y:.1f})"'
        tip = f"<title>{title}</title>" if title else ""
        self.parts.append(f"<text{attrs}>{tip}{body}</text>")

    def label(self, x: float, y: float, body: str, length: int, *, size: float = 12, anchor: str = "start",
              cls: str = "", fill: str = "", candidates: Sequence[tuple[float, float, str]] = ()) -> bool:
        """A label at the first of ``(x, y, anchor)`` and ``candidates`` that overlaps no earlier label; False
        (and nothing drawn) when every place is taken."""
        w = length * CHAR * size / 12
        for cx, cy, anc in [(x, y, anchor), *candidates]:
            x0 = cx - (w if anc == "end" else w / 2 if anc == "middle" else 0)
            box = Box(x0, cy - size * 0.8, x0 + w, cy + size * 0.25)
            if box.x0 < 0 or box.x1 > self.width or any(box.hits(b) for b in self.boxes):
                continue
            self.boxes.append(box)
            self.text(cx, cy, body, anchor=anc, cls=cls, fill=fill)
            return True
        return False

    def reserve(self, x0: float, y0: float, x1: float, y1: float) -> None:
        self.boxes.append(Box(x0, y0, x1, y1))

    def line(self, x1: float, y1: float, x2: float, y2: float, *, stroke: str = GREY, width: float = 1,
             dash: str = "", cls: str = "") -> None:
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        extra += f' class="{cls}"' if cls else ""
        self.parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" '
                          f'stroke-width="{width:g}"{extra}/>')

    def rect(self, x: float, y: float, w: float, h: float, *, fill: str, stroke: str = "none", title: str = "",
             cls: str = "", opacity: float | None = None) -> None:
        extra = f' class="{cls}"' if cls else ""
        extra += f' fill-opacity="{opacity:g}"' if opacity is not None else ""
        tip = f"<title>{title}</title>" if title else ""
        if w < 0:
            x, w = x + w, -w
        if h < 0:
            y, h = y + h, -h
        self.parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}" '
                          f'stroke="{stroke}"{extra}>{tip}</rect>')

    def polyline(self, points: Sequence[tuple[float, float]], *, stroke: str, width: float = 1.5,
                 dash: str = "") -> None:
        if len(points) < 2:
            return
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        self.parts.append(f'<polyline points="{pts}" fill="none" stroke="{stroke}" stroke-width="{width:g}"{extra}/>')

    def marker(self, shape: str, x: float, y: float, colour: str, *, filled: bool = True, size: float = 4.5,
               cls: str = "", title: str = "", data: dict[str, str] | None = None) -> None:
        """A data point. ``title`` (escaped) is its tooltip; ``data`` become ``data-*`` attributes (escaped)."""
        fill = colour if filled else "#ffffff"
        attrs = f' fill="{fill}" stroke="{colour}" stroke-width="{1.3 if filled else 1.8}"'
        if cls:
            attrs += f' class="{cls}"'
        for k, v in (data or {}).items():
            attrs += f' data-{k}="{esc(v)}"'
        tip = f"<title>{title}</title>" if title else ""
        s = size
        if shape == "circle":
            self.parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{s:g}"{attrs}>{tip}</circle>')
            return
        if shape == "square":
            s *= 0.9
            d = f"M{x - s:.1f},{y - s:.1f}h{2 * s:.1f}v{2 * s:.1f}h{-2 * s:.1f}z"
        elif shape == "diamond":
            s *= 1.25
            d = f"M{x:.1f},{y - s:.1f}L{x + s:.1f},{y:.1f}L{x:.1f},{y + s:.1f}L{x - s:.1f},{y:.1f}z"
        elif shape == "triangle":
            s *= 1.2
            d = f"M{x:.1f},{y - s:.1f}L{x + s:.1f},{y + s * 0.8:.1f}L{x - s:.1f},{y + s * 0.8:.1f}z"
        else:  # cross: stroke only
            d = f"M{x - s:.1f},{y - s:.1f}L{x + s:.1f},{y + s:.1f}M{x - s:.1f},{y + s:.1f}L{x + s:.1f},{y - s:.1f}"
            attrs = attrs.replace('stroke-width="1.8"', 'stroke-width="2.2"')
        self.parts.append(f'<path d="{d}"{attrs}>{tip}</path>')

    def styled(self, kind: str, x: float, y: float, *, cls: str, title: str, data: dict[str, str],
               size: float = 4.5) -> None:
        shape, colour, filled, _ = STYLE[kind]
        self.marker(shape, x, y, colour, filled=filled, cls=cls, title=title, data=data, size=size)

    def legend(self, x: float, y: float, items: Sequence[tuple[str, str, bool, str]], *,
               max_x: float | None = None) -> float:
        """Legend entries (shape, colour, filled, escaped text) in rows from (x, y); returns the y below it."""
        cx, right = x, max_x or self.width - 10
        for shape, colour, filled, label in items:
            w = 22 + len(html.unescape(label)) * CHAR + 16
            if cx + w > right and cx > x:
                cx, y = x, y + 20
            if shape == "band":
                self.rect(cx - 6, y - 7, 14, 14, fill=colour, opacity=0.35)
            elif shape in ("line", "dash"):
                self.line(cx - 7, y, cx + 7, y, stroke=colour, width=2, dash="5 3" if shape == "dash" else "")
            else:
                self.marker(shape, cx, y, colour, filled=filled, size=4.5)
            self.text(cx + 12, y + 4, label, cls="small")
            cx += w
        return y + 20

    def axis_x(self, scale: Any, y: float, label: str, *, note: str = "") -> None:
        a, b = min(scale.a, scale.b), max(scale.a, scale.b)
        self.line(a, y, b, y, stroke="#444")
        for px, text in scale.ticks():
            self.line(px, y, px, y + 5, stroke="#444")
            self.text(px, y + 18, text, anchor="middle", cls="tick")
            half = len(html.unescape(text)) * CHAR / 2
            self.reserve(px - half, y + 6, px + half, y + 22)
        for bx in getattr(scale, "breaks", ()):
            self.rect(bx - 4, y - 3, 8, 6, fill="#ffffff")
            self.line(bx - 6, y + 4, bx - 2, y - 4, stroke="#444")
            self.line(bx + 2, y + 4, bx + 6, y - 4, stroke="#444")
        self.text((a + b) / 2, y + 36, label + (f' <tspan class="note">({note})</tspan>' if note else ""),
                  anchor="middle", cls="axis-label")

    def axis_y(self, scale: Any, x: float, label: str, *, grid_to: float | None = None) -> None:
        a, b = min(scale.a, scale.b), max(scale.a, scale.b)
        self.line(x, a, x, b, stroke="#444")
        for py, text in scale.ticks():
            self.line(x - 5, py, x, py, stroke="#444")
            if grid_to is not None:
                self.line(x, py, grid_to, py, stroke="#ececec")
            self.text(x - 8, py + 4, text, anchor="end", cls="tick")
            self.reserve(x - 8 - len(html.unescape(text)) * CHAR, py - 6, x, py + 6)
        for by in getattr(scale, "breaks", ()):
            self.rect(x - 3, by - 4, 6, 8, fill="#ffffff")
            self.line(x - 4, by + 2, x + 4, by - 2, stroke="#444")
            self.line(x - 4, by + 6, x + 4, by + 2, stroke="#444")
        self.text(16, (a + b) / 2, label, anchor="middle", cls="axis-label", rotate=-90)

    def markup(self, ident: str) -> str:
        desc = f'<desc id="{ident}-d">{self.desc}</desc>' if self.desc else ""
        labelled = f"{ident}-t" + (f" {ident}-d" if self.desc else "")
        return (f'<svg class="chart" data-figure="{self.kind}" viewBox="0 0 {self.width:.0f} {self.height:.0f}" '
                f'role="img" aria-labelledby="{labelled}" preserveAspectRatio="xMidYMin meet">'
                f'<title id="{ident}-t">{self.title}</title>{desc}' + "".join(self.parts) + "</svg>")


# --------------------------------------------------------------------------------------------------------------
# the report's data, arranged for the figures


@dataclass
class Confirmation:
    """A run of paired confirmation trials of one baseline against one candidate, in the order they ran."""

    family: str | None
    object: str | None
    baseline: dict[str, int | str] | None = None
    candidate: dict[str, int | str] | None = None
    trials: list[Trial] = field(default_factory=list)
    pairs: list[tuple[Trial, Trial]] = field(default_factory=list)  # (baseline, candidate)
    slots: list[int] = field(default_factory=list)  # per trial: the pair it belongs to (or would have)
    recs: list[Recommendation] = field(default_factory=list)

    def accepts(self, t: Trial) -> bool:
        if (t.family, t.object) != (self.family, self.object):
            return False
        mine = self.baseline if t.arm == "baseline" else self.candidate
        return mine is None or mine == t.config

    def add(self, t: Trial) -> None:
        if t.arm == "baseline" and self.baseline is None:
            self.baseline = dict(t.config)
        elif t.arm == "candidate" and self.candidate is None:
            self.candidate = dict(t.config)
        self.trials.append(t)

    @property
    def changed(self) -> list[str]:
        b, c = self.baseline or {}, self.candidate or {}
        return [k for k in c if k in b and str(b[k]) != str(c[k])]

    def pair_up(self) -> None:
        """Pairs as the sequential test formed them: the successful trials in blocks of four (ABBA, BAAB),
        paired (1st, 2nd) and (3rd, 4th); a failed probe was retried, so it does not shift the blocks."""
        ok = [t for t in self.trials if t.status == "ok" and finite(t.value) is not None]
        for i in range(0, len(ok) - 3, 4):
            for x, y in ((ok[i], ok[i + 1]), (ok[i + 2], ok[i + 3])):
                if {x.arm, y.arm} == {"baseline", "candidate"}:
                    self.pairs.append((x, y) if x.arm == "baseline" else (y, x))
        seen = 0
        for t in self.trials:
            self.slots.append(seen // 2)
            if t.status == "ok" and finite(t.value) is not None:
                seen += 1

    @property
    def ratios(self) -> list[float]:
        return [b.value / c.value for b, c in self.pairs if b.value and c.value]  # type: ignore[operator]

    @property
    def improvement(self) -> float | None:
        rs = [r for r in self.ratios if r > 0]
        return math.exp(sum(map(math.log, rs)) / len(rs)) if rs else None


def confirmations(trials: Sequence[Trial]) -> list[Confirmation]:
    out: list[Confirmation] = []
    cur: Confirmation | None = None
    for t in trials:
        if t.phase != "confirm" or t.arm is None:
            cur = None
            continue
        if cur is None or not cur.accepts(t):
            cur = Confirmation(t.family, t.object)
            out.append(cur)
        cur.add(t)
    for c in out:
        c.pair_up()
    return out


def attach(recs: Sequence[Recommendation], confs: Sequence[Confirmation]) -> None:
    """Each recommendation with an effect to the confirmation whose pairs give that effect (the same number of
    pairs, the same geometric mean); one without an effect to a confirmation of its knob that reached none."""
    for r in recs:
        e = r.effect
        for c in confs:
            if c.candidate is None or str(c.candidate.get(r.knob)) != str(r.recommended):
                continue
            if e is not None:
                imp = c.improvement
                if len(c.pairs) == e.n_pairs and imp is not None and abs(imp - e.improvement) <= 1e-3 * e.improvement + 5e-4:
                    c.recs.append(r)
                    break
            elif r.knob in c.changed and not any(x.effect for x in c.recs) and c.improvement is None:
                c.recs.append(r)
                break


@dataclass
class Search:
    """The search probes of one family on one object over one set of knobs, with the confirmations and
    recommendations of those knobs."""

    family: str | None
    object: str | None
    keys: list[str]
    trials: list[Trial] = field(default_factory=list)
    confirmations: list[Confirmation] = field(default_factory=list)
    recs: list[Recommendation] = field(default_factory=list)

    @property
    def knobs(self) -> list[str]:
        varying = [k for k in self.keys if len({str(t.config.get(k)) for t in self.trials}) > 1]
        return varying or self.keys[:1]

    def today(self, knob: str) -> int | str | None:
        for r in self.recs:
            if r.knob == knob:
                return as_value(r.current)
        for c in self.confirmations:
            if c.baseline and knob in c.baseline:
                return as_value(c.baseline[knob])
        return None

    def rec(self, knob: str) -> Recommendation | None:
        return next((r for r in self.recs if r.knob == knob), None)

    def candidate(self, knob: str) -> int | str | None:
        r = self.rec(knob)
        if r is not None:
            return as_value(r.recommended)
        for c in self.confirmations:
            if c.candidate and knob in c.candidate:
                return as_value(c.candidate[knob])
        return None


def searches(report: Report, confs: Sequence[Confirmation]) -> list[Search]:
    groups: dict[tuple[Any, ...], Search] = {}
    for t in report.trials:
        if t.phase != "search":
            continue
        key = (t.family, t.object, tuple(sorted(t.config)))
        if key not in groups:
            groups[key] = Search(t.family, t.object, list(t.config))
        groups[key].trials.append(t)
    out = list(groups.values())
    roles = {d.device: ", ".join(d.roles) for d in report.devices if d.device}
    for c in confs:
        for g in out:
            if (c.family, c.object) == (g.family, g.object) and c.changed and set(c.changed) <= set(g.keys):
                g.confirmations.append(c)
                break
    for r in report.recommendations:
        for g in out:
            if r.knob not in g.knobs:
                continue
            if any(r in c.recs for c in g.confirmations) or _same_place(r, g, roles):
                g.recs.append(r)
                break
    return out


def _same_place(r: Recommendation, g: Search, roles: dict[str, str]) -> bool:
    if r.scope == "device":
        return r.object is not None and roles.get(r.object) == g.object
    if r.scope == "tablespace":
        return g.object is not None and r.object is not None and r.object in g.object
    return g.object is None


def unit_of(family: str | None) -> str:
    if family == "wal":
        return "ms per transaction"
    if family == "replay":
        return "ms (the standby's time to replay the WAL stream)"
    return "ms (the workload's execution time)"


def _trial_title(t: Trial, knobs: Sequence[str], unit: str) -> str:
    cfg = ", ".join(f"{k} = {t.config.get(k)}" for k in knobs)
    what = f"{t.phase}" + (f", {t.arm}" if t.arm else "")
    if t.status == "ok" and finite(t.value) is not None:
        return esc(f"{cfg}: {num(t.value)} {unit.split(' (')[0]} ({what})")
    return esc(f"{cfg}: {t.status} ({what})" + (f": {t.reason}" if t.reason else ""))


def _kind(t: Trial) -> str:
    if t.status != "ok" or finite(t.value) is None:
        return "rejected" if t.status == "rejected" else "failed"
    return "search" if t.phase == "search" else (t.arm or "candidate")


def _data(t: Trial) -> dict[str, str]:
    return {"phase": t.phase, "status": t.status, "arm": t.arm or ""}


# --------------------------------------------------------------------------------------------------------------
# figures


def _decision_label(r: Recommendation | None, value: Any) -> tuple[str, str]:
    """(label, colour) of the recommendation's line."""
    if r is None:
        return f"candidate {value}", GREY
    if r.decision == "change":
        return f"recommended {value}", GREEN
    return (f"candidate {value} — not enough: keep today's", GREY) if str(r.recommended) != str(r.current) else (
        f"today {value} — keep", GREY)


def search_1d(g: Search, knob: str, figno: int) -> str:
    unit = unit_of(g.family)
    plot_trials = list(g.trials)
    conf_trials = [(c, i, t) for c in g.confirmations for i, t in enumerate(c.trials)]
    all_trials = plot_trials + [t for _, _, t in conf_trials]
    missing = [t for t in all_trials if _kind(t) in ("failed", "rejected")]
    rec, today, cand = g.rec(knob), g.today(knob), g.candidate(knob)
    values: list[Any] = [as_value(t.config[knob]) for t in all_trials if knob in t.config]
    values += [v for v in (today, cand) if v is not None]
    if rec is not None and rec.near_optimal:
        values += list(rec.near_optimal)
    left, right, top = 78.0, W - 24.0, 58.0
    strip = 26.0 if missing else 0.0
    bottom = 300.0
    x = knob_scale(values, left, right)
    oks = [v for t in all_trials if _kind(t) not in ("failed", "rejected") for v in [finite(t.value)] if v is not None]
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
        kind = _kind(t)
        px = x(as_value(t.config[knob]))
        py = top + strip / 2 if kind in ("failed", "rejected") else y(t.value)
        svg.styled(kind, px, py, cls="pt search", title=_trial_title(t, [knob], unit), data=_data(t))
    for c, i, t in conf_trials:
        kind = _kind(t)
        px = x(as_value(t.config[knob])) + ((c.slots[i] % 7) - 3) * 1.6
        py = top + strip / 2 if kind in ("failed", "rejected") else y(t.value)
        svg.styled(kind, px, py, cls="pt confirm", title=_trial_title(t, [knob], unit), data=_data(t), size=3.6)
    log_note = "log scale, 0 set apart" if isinstance(x, Log2p1) else ""
    svg.axis_x(x, bottom, esc(knob), note=log_note)
    present = {_kind(t) for t in all_trials}
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


def search_2d(g: Search, kx: str, ky: str, figno: int) -> str:
    unit = unit_of(g.family)
    trials = list(g.trials)
    left, right, top, bottom = 84.0, W - 155.0, 30.0, 380.0
    today = {k: g.today(k) for k in (kx, ky)}
    cand = {k: g.candidate(k) for k in (kx, ky)}
    vx: list[Any] = [as_value(t.config[kx]) for t in trials] + [v for v in (today[kx], cand[kx]) if v is not None]
    vy: list[Any] = [as_value(t.config[ky]) for t in trials] + [v for v in (today[ky], cand[ky]) if v is not None]
    x, y = knob_scale(vx, left, right), knob_scale(vy, bottom, top)
    oks = [float(t.value) for t in trials if _kind(t) == "search"]  # type: ignore[arg-type]
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
        kind = _kind(t)
        title = _trial_title(t, [kx, ky], unit)
        if kind == "search":
            colour = shade(float(t.value))  # type: ignore[arg-type]
            svg.marker("circle", px, py, colour, cls="pt search", title=title, data=_data(t), size=6)
            places.setdefault(key, []).append(float(t.value))  # type: ignore[arg-type]
        else:
            svg.styled(kind, px, py, cls="pt search", title=title, data=_data(t), size=5)
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
    missing = {_kind(t) for t in trials} & {"failed", "rejected"}
    items = [(STYLE[k][0], STYLE[k][1], STYLE[k][2], esc(STYLE[k][3])) for k in STYLE if k in missing]
    if any(svg_part.find("near-optimal") >= 0 for svg_part in svg.parts):
        items.append(("band", GREEN, True, "near-optimal range"))
    items.append(("circle", ORANGE, False, "today (dashed ring)"))
    if cand[kx] is not None and cand != today:
        items.append(("circle", GREEN, False, f"{cand_word} (solid ring)"))
    end = svg.legend(left, bottom + 60, items) if items else bottom + 50
    svg.height = end
    return svg.markup(f"fig{figno}")


def confirmation_figure(c: Confirmation, floor: float, figno: int) -> str:
    unit = unit_of(c.family)
    slots = max([len(c.pairs)] + [s + 1 for s in c.slots] + [1])
    left, right = 84.0, W - 215.0
    xs = Categories(range(1, slots + 1), left, right)
    a_top, a_bottom = 30.0, 200.0
    oks = [float(t.value) for t in c.trials if _kind(t) in ("baseline", "candidate")]  # type: ignore[arg-type]
    failed = [t for t in c.trials if _kind(t) in ("failed", "rejected")]
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
        kind = _kind(t)
        slot = pair_of.get(id(t), c.slots[i])
        px = xs(slot + 1) + (-7 if t.arm == "baseline" else 7)
        py = a_top + strip / 2 if kind in ("failed", "rejected") else ya(t.value)
        svg.styled(kind, px, py, cls="pt confirm", title=_trial_title(t, c.changed or list(t.config), unit),
                   data=_data(t))
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
    present = {_kind(t) for t in c.trials}
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
        label = f"{knob_label(r)}: {r.current} → {r.recommended}"
        svg.text(left - 10, cy - 2, short(knob_label(r), 38), anchor="end", title=esc(label), cls="small",
                 weight="600")
        svg.text(left - 10, cy + 12, short(f"{r.current} → {r.recommended}", 38), anchor="end", cls="small")
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


def devices_figure(devices: Sequence[DeviceOut], recs: Sequence[Recommendation], figno: int) -> str:
    rows = [d for d in devices if d.status == "probed" and any(
        v is not None for v in (d.raw_read_mb_s, d.seq_scan_mb_s_current, d.seq_scan_mb_s_recommended))]
    left, right = 230.0, W - 200.0
    top = 20.0
    values = [v for d in rows for v in (d.raw_read_mb_s, d.seq_scan_mb_s_current, d.seq_scan_mb_s_recommended)
              if v is not None]
    x = Linear(0, max(values) if values else 1.0, left, right)
    svg = Svg("devices", 0, "per device: raw O_DIRECT reads against sequential-scan throughput",
              esc(f"{len(rows)} devices; MB/s, longer is faster"))
    y = top
    bar_h = 18.0
    for d in rows:
        r = next((r for r in recs if r.knob == "read_ahead_kb" and r.object == d.device), None)
        head = f"{d.device or '-'} ({', '.join(d.roles)})"
        svg.text(8, y + 12, short(head, 70), weight="700", title=esc(head))
        y += 22
        bars = [
            ("raw O_DIRECT read", d.raw_read_mb_s, GREY, None),
            (f"seq scan, today ({d.read_ahead_kb} kB)" if d.read_ahead_kb is not None else "seq scan, today",
             d.seq_scan_mb_s_current, ORANGE, d.efficiency_current),
            (f"seq scan, {'recommended' if r.decision == 'change' else 'candidate'} ({r.recommended} kB)"
             if r is not None else "seq scan, candidate",
             d.seq_scan_mb_s_recommended, GREEN, d.efficiency_recommended),
        ]
        for label, v, colour, eff in bars:
            if v is None:
                continue
            svg.text(left - 8, y + bar_h - 5, esc(label), anchor="end", cls="small")
            svg.rect(left, y, x(v) - left, bar_h, fill=colour, cls="bar",
                     title=esc(f"{label}: {v:.0f} MB/s" + (f", {eff:.0%} of raw" if eff is not None else "")))
            text = f"{v:.0f} MB/s" + (f" · {eff:.0%} of raw" if eff is not None else "")
            svg.text(x(v) + 6, y + bar_h - 5, esc(text), cls="small")
            y += bar_h + 6
        y += 12
    svg.axis_x(x, y, "MB/s")
    svg.height = y + 48
    return svg.markup(f"fig{figno}")


def wal_scaling_figure(report: Report, figno: int) -> str:
    shapes = sorted({s.rows_per_tx for s in report.wal_scaling})
    panel_w = (W - 20) / max(1, min(2, len(shapes)))
    rows_n = math.ceil(len(shapes) / 2)
    panel_h = 250.0
    svg = Svg("wal-scaling", 0, "WAL: transactions per second by client count",
              esc("one panel per transaction size; today's settings (and the recommended ones, where measured)"))
    any_rec = any(s.tps_recommended for s in report.wal_scaling)
    for i, shape in enumerate(shapes):
        ox, oy = 10 + (i % 2) * panel_w, (i // 2) * panel_h
        pts = [s for s in report.wal_scaling if s.rows_per_tx == shape]
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
    shapes = sorted({s.rows_per_tx for s in report.wal_contention})
    panel_w = (W - 20) / max(1, min(2, len(shapes)))
    rows_n = math.ceil(len(shapes) / 2)
    panel_h = 260.0
    svg = Svg("wal-contention", 0, "WAL: where load backends waited, by client count",
              esc("stacked shares of sampled backend states per client count; the rest is everything else "
                  "(running, client, other waits)"))
    for i, shape in enumerate(shapes):
        ox, oy = 10 + (i % 2) * panel_w, (i // 2) * panel_h
        pts = sorted((s for s in report.wal_contention if s.rows_per_tx == shape), key=lambda s: s.clients)
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
             if any(finite(getattr(s, attr)) for s in report.wal_contention)]
    items.append(("square", "#dddddd", True, "everything else"))
    svg.height = svg.legend(80, rows_n * panel_h + 4, items)
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


# --------------------------------------------------------------------------------------------------------------
# the page


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
footer{margin-top:3rem;color:#666;font-size:.85rem;border-top:1px solid #ddd;padding-top:.6rem}
@media (max-width:600px){body{padding:12px 12px 32px;font-size:14px}}
@media print{body{max-width:none;padding:0;font-size:10.5pt}nav{display:none}h2{break-after:avoid}
a{color:inherit;text-decoration:none}.scroll{overflow:visible}svg.chart{min-width:0;max-width:100%}
details>*{display:block}}
"""


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
        return (f"<strong>{esc(knob_label(r))}</strong> {esc(r.current)} → {esc(r.recommended)}: "
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
    sessions.sort(key=lambda s: s[1])
    out: dict[tuple[str, str | None], list[tuple[str, str, dict[str, Any]]]] = {}
    for sid, started, decisions in sessions:
        for d in decisions:
            if isinstance(d, dict) and d.get("knob"):
                out.setdefault((str(d["knob"]), d.get("object")), []).append((sid, started, d))
    return out


def to_html(report: Report, *, history: Sequence[Any] | None = None) -> str:
    floor, stated = min_effect(report)
    confs = confirmations(report.trials)
    attach(report.recommendations, confs)
    groups = searches(report, confs)
    figno = 0

    def fig(head: str, svg: str, caption: str) -> str:
        """A figure with its heading: one block that a printed page does not split."""
        return f"<figure>{head}<div class=scroll>{svg}</div><figcaption>{caption}</figcaption></figure>"

    def next_no() -> int:
        nonlocal figno
        figno += 1
        return figno

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
        if len(knobs) == 2:
            body.append(fig(head, search_2d(g, knobs[0], knobs[1], next_no()),
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
                body.append(fig(head, search_1d(g, k, next_no()),
                    f"Every probe's measured time in {esc(unit)}, lower is better: {len(g.trials)} search probes"
                    f"{f' ({bad})' if bad else ''} as filled circles and {n_conf} confirmation trials as hollow "
                    "markers, spread sideways around today's value and the candidate. These are measurements; the "
                    f"optimiser's model curve is not stored in the report.{near}{others}"))
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
        body.append(fig(f"<h3>{changed or 'baseline against candidate'}{where}</h3>",
            confirmation_figure(c, floor, next_no()),
            f"{len(c.trials)} confirmation trials{f' for {names}' if names else ''}, run in ABBA / BAAB blocks so "
            "a drift cancels within each block. Top: each pair's two measured times (square: today's value, "
            "diamond: the candidate), joined. Bottom: each pair's ratio baseline / candidate; above the dashed line "
            f"the candidate was faster by more than the minimum effect.{result}"))
    if not body:
        body.append("<p>No confirmation ran: no candidate differed from today's values, or nothing was searched.</p>")
    sections.append(("confirmation", "Confirmation: paired trials", "".join(body)))
    # devices
    if report.devices:
        body = []
        if any(d.status == "probed" for d in report.devices):
            body.append(fig("", devices_figure(report.devices, report.recommendations, next_no()),
                "What the device delivers with O_DIRECT reads of a relation file (like dd, no readahead involved) "
                "against what PostgreSQL's cold sequential scan reads from it, with today's readahead and with the "
                "recommended one (median over the confirmation trials); the share is the scan's efficiency."))
        rows = "".join(
            f"<tr><td><code>{esc(d.device or '-')}</code></td><td>{esc(', '.join(d.roles))}</td><td>{esc(d.status)}</td>"
            f"<td class=num>{esc(d.read_ahead_kb) if d.read_ahead_kb is not None else '–'}</td><td>{esc(d.reason)}</td></tr>"
            for d in report.devices)
        body.append("<div class=scroll><table><tr><th>device</th><th>holds</th><th>status</th>"
                    f"<th class=num>read_ahead_kb</th><th>notes</th></tr>{rows}</table></div>")
        sections.append(("devices", "Devices", "".join(body)))
    # WAL
    if report.wal_scaling or report.wal_contention or report.wal_summary:
        body = []
        if report.wal_scaling:
            body.append(fig("", wal_scaling_figure(report, next_no()),
                "Throughput of concurrent INSERT transactions into a scratch table, per client count and transaction "
                "size, measured under today's settings" + (" and the recommended ones" if any(
                    x.tps_recommended for x in report.wal_scaling) else "") + "."))
        if report.wal_contention:
            body.append(fig("", wal_contention_figure(report, next_no()),
                "Where load backends spent their time, as shares of sampled backend states: waiting for a WAL "
                "insertion lock, for a WAL write, for a WAL flush (sync), for WAL buffer mapping; the light grey "
                "rest is everything else (running, waiting for the client, other waits)."))
        if report.wal_summary:
            body.append(f"<p>{esc(report.wal_summary)}</p>")
        sections.append(("wal", "WAL", "".join(body)))
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
