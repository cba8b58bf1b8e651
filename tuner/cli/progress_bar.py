"""Progress for people at a terminal (rich, on stderr); silent otherwise — the log lines carry it.

Besides the phase at hand (search, confirm, …: its own bar), a session line counts every probe against the most
the session may make (the policy's budgets for each chosen family: :func:`most_probes`) and says how long what
remains would take at the pace so far — an upper bound, since a search or a confirmation may stop earlier.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)

from tuner.settings.policy import Policy

SANDBOX_PHASE = "sandbox"  # its steps (initdb, loading data, …) are not probes


def most_probes(policy: Policy, families: Sequence[str], budget: int | None) -> int:
    """The most probes a session over ``families`` makes by ``policy``'s budgets: each family's search (``budget``
    or ``[budget] probes``) and its longest confirmation (two trials a pair)."""
    b = policy.budget
    return len(families) * ((budget or b.probes) + 2 * b.confirm_max_pairs)


class TerminalProgress:
    def __init__(self, most: int | None = None) -> None:
        self._console = Console(file=sys.stderr)
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.fields[phase]:<8}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[left]}"),
            TimeRemainingColumn(compact=True),
            TextColumn("{task.description}"),
            console=self._console,
            transient=False,
        )
        self._task: TaskID | None = None
        self._phase = ""
        # The whole session: every probe against the most it may make (None: no count given).
        self._session = (self._progress.add_task("", total=most, phase="session", left="at most, left:")
                         if most else None)

    @property
    def session(self) -> tuple[int, int] | None:
        """(probes made, the most the session may make), None without a count."""
        if self._session is None:
            return None
        task = next(t for t in self._progress.tasks if t.id == self._session)
        return int(task.completed), int(task.total or 0)

    @property
    def shows_remaining(self) -> bool:
        return any(isinstance(c, TimeRemainingColumn) for c in self._progress.columns)

    def __enter__(self) -> TerminalProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def phase(self, name: str, total: int | None) -> None:
        if self._task is not None:
            self._progress.update(self._task, completed=self._progress.tasks[-1].total or self._progress.tasks[-1].completed)
        self._task = self._progress.add_task("", total=total, phase=name, left="")
        self._phase = name

    def advance(self, text: str) -> None:
        if self._task is None:
            self.phase("", None)
        assert self._task is not None
        self._progress.update(self._task, advance=1, description=text)
        if self._session is not None and self._phase != SANDBOX_PHASE:
            self._progress.update(self._session, advance=1)
