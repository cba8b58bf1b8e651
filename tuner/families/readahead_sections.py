"""What the readahead family owns of the policy and the report: its policy table (``[readahead]``, empty since
the read path's workload moved to ``[read_path]``) and the block devices it found and measured (the report's
``devices``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tuner.settings.config import Section
from tuner.report.model import EffectOut, ReportSection, _Frozen


class Policy(Section):
    """The [readahead] table: nothing of its own. The workload it probes (cold sequential scans and sparse bitmap
    heap scans of one device's relations) is the read path's, ``[read_path]`` (one for every family that probes
    it); a policy written before that sets its weights here, and they are read from here (with a warning)."""


class Combination(_Frozen):
    """The read path confirmed as one (issue #53): the values searched together, against today's, in paired trials —
    the interval of what the operator will run, beside each knob's own share in its recommendation."""

    today: dict[str, int]
    candidate: dict[str, int]
    decision: Literal["change", "keep"]
    reason: str
    effect: EffectOut | None = None

    def sentence(self) -> str:
        def values(v: dict[str, int]) -> str:
            return ", ".join(f"{k} {n}" for k, n in v.items())

        head = f"read path confirmed as one: {values(self.candidate)} against today's {values(self.today)}"
        if self.candidate == self.today:
            return f"{head}: nothing to confirm, today's values are the answer"
        if self.effect is None:
            return f"{head}: {self.decision} ({self.reason})"
        lo, hi = self.effect.ci95
        return f"{head}: {self.effect.improvement:.2f}x [{lo:.2f}–{hi:.2f}] over {self.effect.n_pairs} pairs ({self.decision})"


class DeviceOut(_Frozen):
    """A block device under the target's directories, what it holds, and what the readahead family measured."""

    device: str | None  # /dev/NAME, None when the directory has no tunable device
    description: str
    roles: list[str]
    read_ahead_kb: int | None  # before tuner touched it
    status: Literal["probed", "skipped", "not tunable"]
    reason: str
    raw_read_mb_s: float | None = Field(default=None, description="O_DIRECT reads of a relation file (like dd)")
    seq_scan_mb_s_current: float | None = Field(default=None, description="median over confirmation trials")
    seq_scan_mb_s_recommended: float | None = None
    efficiency_current: float | None = Field(default=None, description="seq scan MB/s / raw MB/s")
    efficiency_recommended: float | None = None
    combination: Combination | None = Field(default=None, description="the read path's knobs confirmed together")


class Report(ReportSection):
    """The block devices under the target's directories, whether each was probed and what it measured."""

    devices: list[DeviceOut] = Field(default_factory=list)

    def table(self) -> list[Any]:
        lines: list[Any] = []
        for d in self.devices:
            line = f"device {d.device or '-'} ({', '.join(d.roles)}): {d.status}"
            if d.status == "probed":
                figures = []
                if d.raw_read_mb_s is not None:
                    figures.append(f"raw O_DIRECT read {d.raw_read_mb_s:.0f} MB/s")
                if d.seq_scan_mb_s_current is not None:
                    rec_txt = (f" -> {d.seq_scan_mb_s_recommended:.0f}" if d.seq_scan_mb_s_recommended is not None
                               else "")
                    figures.append(f"seq scan {d.seq_scan_mb_s_current:.0f}{rec_txt} MB/s")
                if d.efficiency_current is not None:
                    rec_eff = f" -> {d.efficiency_recommended:.0%}" if d.efficiency_recommended is not None else ""
                    figures.append(f"efficiency {d.efficiency_current:.0%}{rec_eff}")
                line += (": " + ", ".join(figures)) if figures else ""
                if d.combination is not None:
                    line += f"; {d.combination.sentence()}"
            else:
                line += f" — {d.reason}"
            lines.append(line)
        return lines

    def confirmed(self) -> list[tuple[str, EffectOut]]:
        """Each device's read path confirmed as one, against today's: what each query gains from the combination."""
        out = []
        for d in self.devices:
            c = d.combination
            if c is not None and c.effect is not None and c.effect.queries:
                moved = ", ".join(f"{k} {c.today.get(k)} -> {v}" for k, v in c.candidate.items() if v != c.today.get(k))
                kept = ", ".join(f"{k} {v}" for k, v in c.candidate.items() if v == c.today.get(k))
                out.append((f"per query: read path on {d.device}: {moved}{f' at {kept}' if kept else ''} "
                            f"({c.decision})", c.effect))
        return out

    def trial_objects(self) -> dict[str, str]:
        # A device-scope recommendation names the device; the family's trials name the directories on it.
        return {d.device: ", ".join(d.roles) for d in self.devices if d.device}
