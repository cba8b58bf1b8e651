"""structlog setup: human console lines on a terminal, JSON lines otherwise; always on stderr.

Results go to stdout; logs never do, so ``tuner recommend --format json | jq`` stays clean.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog

from tuner import redact

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure(level: str = "info", *, stream: TextIO | None = None, json: bool | None = None) -> None:
    """Configure structlog for the process.

    ``json=None`` picks JSON when ``stream`` is not a terminal (systemd, pipes, CI) and the console
    renderer on a terminal.
    """
    out = stream if stream is not None else sys.stderr
    if json is None:
        json = not out.isatty()
    renderer: structlog.typing.Processor
    if json:
        renderer = structlog.processors.JSONRenderer(sort_keys=False)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=out.isatty())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _hide_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )


def _hide_secrets(_logger: object, _name: str, event: structlog.typing.EventDict) -> structlog.typing.EventDict:
    """Every string field with its passwords hidden (:func:`tuner.redact.text`): a DSN or a command that reaches a
    log line unredacted by its caller is still safe."""
    return {k: redact.text(v) if isinstance(v, str) else v for k, v in event.items()}


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    if not structlog.is_configured():
        # Never let library use print logs to stdout: stdout carries results (JSON, SQL).
        configure()
    return structlog.get_logger(name)  # type: ignore[no-any-return]
