"""What the concurrency family owns of the policy: its workload mix and the io_method values it screens (the
policy's ``[concurrency]`` table). Its report section is its trials' own evidence (no section of its own)."""

from __future__ import annotations

from pydantic import Field, model_validator

from tuner.settings.config import Section

IO_METHODS = ("sync", "worker", "io_uring")  # PostgreSQL 18's io_method values (io_uring only in some builds)


class Policy(Section):
    """The concurrency family's table: the io_method values it screens on 18+. Its workload is the read path's
    (``[read_path]``): where read streams serve sequential scans too (from 17 ``io_combine_limit`` sizes their
    reads, from 18 ``effective_io_concurrency`` sets their look-ahead: see ``tuner.probes.workload.seq_scan_knobs``)
    the objective is ``seq_scan_weight * seq_ms + bitmap_scan_weight * bitmap_ms``; up to 16 the family probes
    bitmap heap scans alone and the weights are not used. With ``bitmap_scan_weight = 0`` no bitmap scan is probed
    on 17+: no knob acts on it alone there."""

    io_method: tuple[str, ...] = Field(
        default=IO_METHODS, max_length=len(IO_METHODS),
        description="io_method values screened against today's on 18+ (a restart each: only with "
        "guardrails.allow_restart), those the build offers",
    )

    @model_validator(mode="after")
    def _known_methods(self) -> Policy:
        unknown = [m for m in self.io_method if m not in IO_METHODS]
        if unknown:
            raise ValueError(f"io_method values {unknown} are not PostgreSQL's ({', '.join(IO_METHODS)})")
        return self
