"""PostgreSQL server binaries from a newer Debian suite than the host's, runnable on the host without a chroot.

Debian's ``trixie`` (postgresql-17), ``sid`` (postgresql-18, built with liburing) and ``experimental``
(postgresql-19) need a newer C library than bookworm's, so they cannot be installed beside it. Instead, the suite's
packages — the server, its client tools and the libraries they link, the suite's own ``libc6`` among them — are
downloaded with apt under a private configuration (the host's apt sources and state are never touched) and unpacked
with ``dpkg-deb -x`` into one directory. Every PostgreSQL executable then gets that directory's dynamic loader as its
ELF interpreter and the directory's library paths as its ``DT_RPATH`` (``patchelf --set-interpreter --force-rpath``):
``DT_RPATH``, unlike ``DT_RUNPATH``, also governs the libraries those libraries load and the modules ``dlopen``
brings in later (ld.so(8), "Rpath token expansion" / search order), and it comes before ``LD_LIBRARY_PATH``. So
``pg_ctl`` → ``postgres`` and ``initdb`` → ``postgres --boot`` exec chains work as in an installed package, with no
mounts and no process to clean up; PostgreSQL finds ``share/`` and ``lib/`` relative to its own binary
(``make_relative_path`` in src/port/path.c), so the unpacked ``usr/`` tree works where it is.

Chosen over a chroot per suite (mmdebstrap): that needs the server to run inside the chroot, the sandbox's data
directory, sockets and loop-device mount bind-mounted into it, and every mount undone on every exit path.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import SandboxError

ARCHIVE = "http://deb.debian.org/debian"
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
_MULTIARCH = "x86_64-linux-gnu"
_LOADER = "ld-linux-x86-64.so.2"
# JIT pulls in LLVM (~120 MB unpacked) and tuner never probes with it: the JIT provider module is removed with it,
# and PostgreSQL then runs with JIT unavailable ("jit_provider" absent: jit.c's provider_init checks the file).
_SKIPPED = re.compile(r"^libllvm")
_ELF = b"\x7fELF"
_PT_INTERP = 3


@dataclass(frozen=True)
class DebianSuite:
    """Where one major version comes from: ``suites`` are put in the private sources list; the PostgreSQL packages
    (and libpq5, which their client tools need at the same version) are taken from ``pg_suite``, the rest from
    the default candidate of ``suites``."""

    major: int
    suites: tuple[str, ...]
    pg_suite: str

    @property
    def roots(self) -> tuple[str, ...]:
        return (f"postgresql-{self.major}", f"postgresql-client-{self.major}", "libpq5")


def build(suite: DebianSuite, dest: Path, work: Path, patchelf: Path) -> Path:
    """Unpack ``suite``'s PostgreSQL into ``work`` (a directory that will be renamed to ``dest``, whose paths the
    binaries are patched with) and return its bin directory relative to ``work``."""
    apt = _Apt(work / "apt", suite)
    apt.update()
    packages = apt.closure()
    debs = apt.download(packages)
    root = work / "root"
    root.mkdir()
    for deb in debs:
        _run(["dpkg-deb", "-x", str(deb), str(root)], f"cannot unpack {deb.name}")
    shutil.rmtree(work / "apt", ignore_errors=True)  # the .deb files: the unpacked tree is what is kept
    pg = Path("usr/lib/postgresql") / str(suite.major)
    for jit in (root / pg / "lib").glob("llvmjit*"):
        if jit.is_dir():
            shutil.rmtree(jit)
        else:
            jit.unlink()
    loader = _find_loader(root)
    final = dest / "root"
    interpreter = final / loader.relative_to(root)
    rpath = ":".join(str(final / d) for d in (
        f"usr/lib/{_MULTIARCH}", f"lib/{_MULTIARCH}", f"{pg}/lib"))
    for path in sorted((root / pg).rglob("*")):
        if path.is_symlink() or not path.is_file() or not _is_elf(path):
            continue
        args = ["--force-rpath", "--set-rpath", rpath]
        if _has_interpreter(path):
            args = ["--set-interpreter", str(interpreter), *args]
        _run([str(patchelf), *args, str(path)], f"patchelf failed on {path.name}")
    return Path("root") / pg / "bin"


class _Apt:
    """apt-get and apt-cache with a configuration of their own under ``dir``: sources, lists, status and archives."""

    def __init__(self, dir: Path, suite: DebianSuite) -> None:
        self.dir = dir
        self.suite = suite
        for sub in ("lists/partial", "archives/partial", "debs"):
            (dir / sub).mkdir(parents=True, exist_ok=True)
        (dir / "status").write_text("")  # nothing installed: every dependency is resolved from the suite
        signed = f" [signed-by={KEYRING}]" if KEYRING.is_file() else ""
        (dir / "sources.list").write_text(
            "".join(f"deb{signed} {ARCHIVE} {s} main\n" for s in suite.suites))
        self.options = [
            f"-o=Dir::Etc::SourceList={dir / 'sources.list'}", "-o=Dir::Etc::SourceParts=-",
            f"-o=Dir::Etc::Preferences={dir / 'preferences'}", "-o=Dir::Etc::PreferencesParts=-",
            f"-o=Dir::State::Lists={dir / 'lists'}", f"-o=Dir::State::Status={dir / 'status'}",
            f"-o=Dir::Cache={dir}", f"-o=Dir::Cache::Archives={dir / 'archives'}",
            "-o=Debug::NoLocking=1", "-o=APT::Architecture=amd64", "-o=APT::Architectures=amd64",
            "-o=Acquire::Retries=3", "-o=APT::Sandbox::User=root",
        ]

    def update(self) -> None:
        out = _run(["apt-get", *self.options, "-q", "update"], "", check=False)
        if out.returncode != 0 or "Err:" in out.stdout or "W: Failed" in out.stderr:
            reason = _last_line(out.stderr or out.stdout)
            raise SandboxError(
                f"cannot read Debian's package lists for {' + '.join(self.suite.suites)} "
                f"(needed for PostgreSQL {self.suite.major}): {reason}",
                hint="check network access to Debian's archive, or set [sandbox] bin_dir to installed binaries",
            )

    def closure(self) -> list[str]:
        """The PostgreSQL packages and every library package they need, transitively. Maintainer-script and
        policy packages (postgresql-common, debconf, perl, tzdata, locales) are left out: nothing is installed, the
        server runs from the unpacked tree and reads the host's time zone data."""
        wanted: list[str] = []
        todo = list(self.suite.roots)
        seen: set[str] = set(todo)
        while todo:
            out = _run(["apt-cache", *self.options, "depends", "--no-recommends", "--no-suggests", "--no-conflicts",
                        "--no-breaks", "--no-replaces", "--no-enhances", *todo],
                       f"cannot resolve PostgreSQL {self.suite.major}'s dependencies in {self.suite.suites[-1]}")
            wanted += todo
            todo = []
            for name in _depends(out.stdout):
                if name not in seen and _library(name, self.suite.major):
                    seen.add(name)
                    todo.append(name)
        return wanted

    def download(self, packages: list[str]) -> list[Path]:
        names = [f"{p}/{self.suite.pg_suite}" if p in self.suite.roots else p for p in packages]
        _run(["apt-get", *self.options, "-q", "download", *names],
             f"cannot download PostgreSQL {self.suite.major}'s packages from Debian's archive", cwd=self.dir / "debs")
        debs = sorted((self.dir / "debs").glob("*.deb"))
        if len(debs) != len(packages):
            raise SandboxError(f"Debian's archive gave {len(debs)} of the {len(packages)} packages PostgreSQL "
                               f"{self.suite.major} needs")
        return debs


def _depends(apt_cache_output: str) -> list[str]:
    """Package names from ``apt-cache depends``: of alternatives (``|Depends:`` lines, then the last one) the first
    real package is taken; virtual ones (``<name>``) are skipped."""
    names: list[str] = []
    in_alternatives = False
    for line in apt_cache_output.splitlines():
        m = re.match(r"^\s+(\|?)(?:Pre)?Depends: (\S+)", line)
        if not m:
            continue
        alternative, name = m.group(1) == "|", m.group(2)
        if not in_alternatives and not name.startswith("<"):
            names.append(name.split(":")[0])
            in_alternatives = alternative
        elif not alternative:
            in_alternatives = False
    return names


def _library(name: str, major: int) -> bool:
    if _SKIPPED.match(name):
        return False
    return name.startswith("lib") or name == "zlib1g" or name in (f"postgresql-{major}", f"postgresql-client-{major}")


def _find_loader(root: Path) -> Path:
    for d in (f"usr/lib/{_MULTIARCH}", f"lib/{_MULTIARCH}", "usr/lib64", "lib64"):
        p = root / d / _LOADER
        if p.is_file() and not p.is_symlink():
            return p
    raise SandboxError(f"the unpacked libc6 has no {_LOADER}")


def _is_elf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == _ELF


def _has_interpreter(path: Path) -> bool:
    """Has a 64-bit little-endian ELF file a PT_INTERP program header (an executable, not a library)?"""
    with open(path, "rb") as f:
        header = f.read(64)
        if len(header) < 64 or header[4] != 2 or header[5] != 1:  # ELFCLASS64, ELFDATA2LSB
            return False
        phoff = int.from_bytes(header[32:40], "little")
        phentsize = int.from_bytes(header[54:56], "little")
        phnum = int.from_bytes(header[56:58], "little")
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            if int.from_bytes(f.read(4), "little") == _PT_INTERP:
                return True
    return False


def _run(cmd: list[str], failure: str, *, check: bool = True, cwd: Path | None = None
         ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"}
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env, cwd=cwd)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxError(f"{failure}: {exc}") from None
    if check and out.returncode != 0:
        raise SandboxError(f"{failure}: {_last_line(out.stderr or out.stdout)}")
    return out


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("E:", "Err:", "W:"))]
    return (errors or lines or ["no output"])[-1]
