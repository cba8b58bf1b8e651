"""The HTML report's I/O panel: what the data device did during each probe, and the regime line that follows.

Per workload (a family's probes with device readings): one figure — each probe's read rate (MiB/s under a
throughput cap, else IOPS) against its mean reads in flight, with the cap the reads ran at as a dashed line — and a folded table of every probe's figures. A flat row
of points under the line while the reads in flight spread sideways is a cap; points climbing to the right are a
device that answers more reads at once (latency-bound). The figures are the device's own counters
(:mod:`tuner.probes.diskstat`), the sentence is the report's ``io_regime`` (:mod:`tuner.core.regime`).
"""

from __future__ import annotations

from collections.abc import Sequence

from tuner.emit.svg import STYLE, VERMILLION, Figures, Linear, Svg, esc
from tuner.report.model import IoRegimeOut, Report, Trial
from tuner.probes.diskstat import BUSY, IN_FLIGHT, IOPS, KIB_PER_READ, LATENCY_MS, MIB_S, READS

# (metric, heading, decimals) of the per-probe table
COLUMNS = ((IOPS, "IOPS", 0), (MIB_S, "MiB/s", 1), (KIB_PER_READ, "KiB per read", 1),
           (IN_FLIGHT, "reads in flight", 2), (LATENCY_MS, "ms per read", 3), (BUSY, "busy", 2))


def _probes(report: Report, regime: IoRegimeOut) -> list[Trial]:
    return [t for t in report.trials if (t.family or None) == regime.family and t.status == "ok"
            and IOPS in t.metrics and IN_FLIGHT in t.metrics]


def _kind(t: Trial) -> str:
    return t.arm if t.phase == "confirm" and t.arm in ("baseline", "candidate") else "search"


def _config(t: Trial) -> str:
    return ", ".join(f"{k}={v}" for k, v in t.config.items())


def figure(regime: IoRegimeOut, probes: Sequence[Trial], no: int) -> str:
    """The capped rate (MiB/s for a throughput cap, else IOPS) against reads in flight, one marker per probe, the
    cap as a dashed line."""
    left, right, top, bottom = 78.0, 740.0, 20.0, 250.0
    key, unit, cap = ((MIB_S, "MiB/s", regime.cap_mib_s) if regime.regime == "throughput"
                      else (IOPS, "IOPS", regime.cap_iops))
    depth = [t.metrics[IN_FLIGHT] for t in probes]
    rates = [t.metrics.get(key, 0.0) for t in probes] + ([cap] if cap else [])
    x = Linear(0.0, max(depth) * 1.05 or 1.0, left, right)
    y = Linear(0.0, max(rates) * 1.1 or 1.0, bottom, top)
    svg = Svg("io-regime", bottom + 90, f"Read {unit} against reads in flight, {len(probes)} probes",
              esc(regime.sentence))
    svg.axis_y(y, left, f"read {unit}", grid_to=right)
    svg.axis_x(x, bottom, "mean reads in flight (read ticks / wall time)")
    if cap:
        svg.line(left, y(cap), right, y(cap), stroke=VERMILLION, width=1.5, dash="6 4")
        svg.label(right - 4, y(cap) - 6, esc(f"cap {cap:,.0f} {unit} ({regime.cap_source})"), 30, anchor="end",
                  fill=VERMILLION)
    for t in probes:
        m = t.metrics
        svg.styled(_kind(t), x(m[IN_FLIGHT]), y(m.get(key, 0.0)), cls="io-probe", data={"config": _config(t)},
                   title=esc(f"{_config(t)}: {m[IOPS]:,.0f} IOPS, {m.get(MIB_S, 0):,.1f} MiB/s, "
                             f"{m[IN_FLIGHT]:.2f} in flight, {m.get(LATENCY_MS, 0):.3f} ms per read"))
    kinds = [k for k in ("search", "baseline", "candidate") if any(_kind(t) == k for t in probes)]
    items = [(STYLE[k][0], STYLE[k][1], STYLE[k][2], esc(STYLE[k][3])) for k in kinds]
    if cap:
        items.append(("dash", VERMILLION, False, "the cap the reads ran at"))
    svg.legend(left, bottom + 60, items)
    return svg.markup(f"fig{no}")


def table(probes: Sequence[Trial]) -> str:
    head = "".join(f"<th class=num>{esc(h)}</th>" for _, h, _ in COLUMNS)
    rows = "".join(
        f"<tr><td><code>{esc(_config(t))}</code></td><td>{esc(_kind(t))}</td>"
        f"<td class=num>{t.metrics.get(READS, 0):,.0f}</td>"
        + "".join(f"<td class=num>{t.metrics[k]:,.{d}f}</td>" if k in t.metrics else "<td class=num>–</td>"
                  for k, _, d in COLUMNS) + "</tr>"
        for t in probes)
    return (f"<details><summary>each probe's device figures ({len(probes)})</summary><div class=scroll><table>"
            f"<tr><th>configuration</th><th>probe</th><th class=num>reads</th>{head}</tr>{rows}</table></div>"
            "</details>")


def io_sections(report: Report, figures: Figures) -> list[tuple[str, str, str]]:
    """The panel as (id, heading, body HTML); nothing when the report carries no regime (older reports)."""
    if not report.io_regime:
        return []
    body = []
    for regime in report.io_regime:
        probes = _probes(report, regime)
        where = f" ({esc(regime.family)})" if regime.family else ""
        line = f'<p class="reason"><strong>What limits the reads{where}:</strong> {esc(regime.sentence)}</p>'
        if not probes:
            body.append(line)
            continue
        device = f" ({esc(regime.device)})" if regime.device else ""
        body.append(line + figures.figure(
            "", figure(regime, probes, figures.next_no()),
            f"The data device's own counters{device}, /sys/block/…/stat, over each probe's scans: the read rate "
            "(MiB/s under a throughput cap, else IOPS) against the mean number of reads in flight. Points flat under a dashed cap while they spread "
            "sideways: the device's cap, which no setting raises; points climbing to the right: a device that "
            "answers more reads at once, so more concurrency pays.") + table(probes))
    profile = (f"<p class=meta>Device profile of this sandbox session: <code>{esc(report.device_profile)}</code>"
               "</p>" if report.device_profile else "")
    return [("io-regime", "What limits the reads", profile + "".join(body))]

