"""Progress for people at a terminal (rich, on stderr); silent otherwise — the log lines carry it."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn


class TerminalProgress:
    def __init__(self) -> None:
        self._console = Console(file=sys.stderr)
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.fields[phase]:<8}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=self._console,
            transient=False,
        )
        self._task: TaskID | None = None

    def __enter__(self) -> TerminalProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def phase(self, name: str, total: int | None) -> None:
        if self._task is not None:
            self._progress.update(self._task, completed=self._progress.tasks[-1].total or self._progress.tasks[-1].completed)
        self._task = self._progress.add_task("", total=total, phase=name)

    def advance(self, text: str) -> None:
        if self._task is None:
            self.phase("", None)
        assert self._task is not None
        self._progress.update(self._task, advance=1, description=text)
