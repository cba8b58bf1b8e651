"""The readahead family's section of the HTML report: per device, what the device delivers with raw O_DIRECT reads
against what PostgreSQL's cold sequential scan reads from it, today and with the recommended readahead."""

from __future__ import annotations

from collections.abc import Sequence

from tuner.emit.svg import GREEN, GREY, ORANGE, W, Figures, Linear, Svg, esc, short
from tuner.families.readahead_sections import DeviceOut
from tuner.families.readahead_sections import Report as Section
from tuner.report.model import Recommendation, Report


def html_sections(report: Report, figures: Figures) -> list[tuple[str, str, str]]:
    """The report's devices as (id, heading, body HTML); nothing when the report has no device."""
    devices = Section.of(report, "readahead").devices
    if not devices:
        return []
    body: list[str] = []
    if any(d.status == "probed" for d in devices):
        body.append(figures.figure("", devices_figure(devices, report.recommendations, figures.next_no()),
            "What the device delivers with O_DIRECT reads of a relation file (like dd, no readahead involved) "
            "against what PostgreSQL's cold sequential scan reads from it, with today's readahead and with the "
            "recommended one (median over the confirmation trials); the share is the scan's efficiency."))
    rows = "".join(
        f"<tr><td><code>{esc(d.device or '-')}</code></td><td>{esc(', '.join(d.roles))}</td><td>{esc(d.status)}</td>"
        f"<td class=num>{esc(d.read_ahead_kb) if d.read_ahead_kb is not None else '–'}</td><td>{esc(d.reason)}"
        + (f"<br>{esc(d.combination.sentence())}" if d.combination is not None else "") + "</td></tr>"
        for d in devices)
    body.append("<div class=scroll><table><tr><th>device</th><th>holds</th><th>status</th>"
                f"<th class=num>read_ahead_kb</th><th>notes</th></tr>{rows}</table></div>")
    return [("devices", "Devices", "".join(body))]


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
