"""The servers a session probes — the configured target, or a sandbox tuner starts itself — and how to restart them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tuner.settings.config import Config
from tuner.errors import TunerError
from tuner.sandbox import Sandbox
from tuner.sandbox.provider import sandbox_binaries

if TYPE_CHECKING:  # (core.loops imports the optimiser stack: the daemon's idle footprint stays without it)
    from tuner.core.loops import Progress

# How a session restarts a server (a sandbox's pg_ctl, or [target] restart_command): the one definition, used
# by the cache control, the families and the endpoints.
Restart = Callable[[], Awaitable[None]]


RESTART_TIMEOUT_S = 300.0


def restart_command(command: str, *, timeout_s: float = RESTART_TIMEOUT_S) -> Restart:
    """``[target] restart_command`` as an awaitable that raises :class:`TunerError` when the command fails or
    does not finish within ``timeout_s`` (its process group is then killed)."""

    async def restart() -> None:
        # Output goes to a file, not a pipe, and the command runs in a session of its own: if tuner dies
        # mid-restart (SIGKILL), pg_ctl must not die of SIGPIPE between stopping and starting the server.
        with tempfile.TemporaryFile() as out:
            proc = await asyncio.create_subprocess_shell(
                command, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
            )
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), timeout_s)
            except asyncio.CancelledError:
                # Stopped mid-restart (SIGTERM, a window that closed): let the restart finish, within a bound, so
                # that what the stop does next — put the journal back — meets a server that is up again.
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(proc.wait()), min(timeout_s, 60.0))
                raise
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
                raise TunerError(f"restart_command did not finish within {timeout_s:g} s; it was killed",
                                 hint="check the command by hand; the staging server may be stopped") from None
            out.seek(0)
            text = out.read().decode(errors="replace")
        if proc.returncode != 0:
            detail = text.strip().splitlines()
            raise TunerError(f"restart_command failed: {detail[-1] if detail else 'exit ' + str(proc.returncode)}")

    return restart


@dataclass(frozen=True)
class Servers:
    """Where a session probes: ``dsn`` read-only (a hot standby or a marked clone), ``writable_dsn`` where families
    that write run (the target itself, or in a sandbox its primary, marked staging)."""

    dsn: str | None
    restart: Restart | None
    writable_dsn: str | None
    writable_restart: Restart | None
    own_devices: frozenset[str] = frozenset()  # block devices that belong to tuner (a sandbox's loop device)
    sandbox_dir: str | None = None


@asynccontextmanager
async def servers(
    cfg: Config, *, use_sandbox: bool, progress: Progress, writable: bool
) -> AsyncIterator[Servers]:
    """The configured target, or a sandbox (with a primary marked staging when ``writable`` families run) that
    is removed when the block ends."""
    if not use_sandbox:
        restart = restart_command(cfg.target.restart_command) if cfg.target.restart_command else None
        yield Servers(cfg.target.dsn, restart, cfg.target.dsn, restart)
        return
    progress.phase("sandbox", None)
    # A version not cached yet is built first (a download of a few seconds to minutes): off the event loop.
    binaries = await asyncio.to_thread(sandbox_binaries, cfg.sandbox.bin_dir, cfg.sandbox.pg_version)
    sandbox = Sandbox(
        base_dir=cfg.sandbox.base_dir,
        scale=cfg.sandbox.scale,
        binaries=binaries,
        keep=cfg.sandbox.keep,
        on_step=progress.advance,
        disk=cfg.sandbox.disk,
        staging_primary=writable,
        device=cfg.sandbox.device,
    )
    async with sandbox:
        yield Servers(
            sandbox.dsn("standby"), sandbox.restart_standby,
            sandbox.dsn("primary"), sandbox.restart_primary,
            own_devices=frozenset([sandbox.device] if sandbox.device else []),
            sandbox_dir=str(sandbox.root),
        )
