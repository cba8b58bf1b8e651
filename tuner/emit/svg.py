"""The chart kit of the HTML report: a palette, number formats, axes (scales) and :class:`Svg`, one figure as
inline SVG. It knows nothing of reports; the figures (:mod:`tuner.emit.figures`, and the families' own sections)
draw with it.

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
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.emit import quote

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
# figures on a page


class Figures:
    """A page's figures, numbered in the order they are drawn; each a block with its heading that a printed page
    does not split."""

    def __init__(self) -> None:
        self.count = 0

    def next_no(self) -> int:
        """The number of the figure about to be drawn (its SVG's id)."""
        self.count += 1
        return self.count

    @staticmethod
    def figure(head: str, svg: str, caption: str) -> str:
        """``head`` (HTML, may be empty), the figure's ``svg`` and its ``caption`` (HTML) as one ``<figure>``."""
        return f"<figure>{head}<div class=scroll>{svg}</div><figcaption>{caption}</figcaption></figure>"
