"""Which packages a Debian suite's PostgreSQL needs (tuner/sandbox/debsuite.py): apt-cache's answer read
right, and only the libraries kept. Pure parsing of apt-cache's output as it prints it (postgresql-19, 19~rc1-1)."""

from __future__ import annotations

from tuner.sandbox.debsuite import DebianSuite, _depends, _library

APT_CACHE = """postgresql-19
 |Depends: locales
  Depends: locales-all
  Depends: postgresql-client-19
  Depends: postgresql-common
 |Depends: debconf
  Depends: <debconf-2.0>
    cdebconf
    debconf
  Depends: libc6
  Depends: libicu78
  Depends: libllvm19
  Depends: liburing2
  Depends: zlib1g
libc6
  PreDepends: libgcc-s1
  Depends: libc-gconv-modules-extra
  Recommends: libidn2-0
"""


def test_the_first_of_alternatives_is_taken_and_virtual_packages_are_skipped() -> None:
    assert _depends(APT_CACHE) == ["locales", "postgresql-client-19", "postgresql-common", "debconf", "libc6",
                                   "libicu78", "libllvm19", "liburing2", "zlib1g", "libgcc-s1",
                                   "libc-gconv-modules-extra"]


def test_only_libraries_and_the_versions_own_packages_are_unpacked() -> None:
    kept = [n for n in _depends(APT_CACHE) if _library(n, 19)]
    # No maintainer-script or policy packages (nothing is installed), no LLVM (JIT is left out).
    assert kept == ["postgresql-client-19", "libc6", "libicu78", "liburing2", "zlib1g", "libgcc-s1",
                    "libc-gconv-modules-extra"]
    assert not _library("postgresql-client-18", 19)


def test_the_server_client_and_libpq_come_from_the_versions_own_suite() -> None:
    assert DebianSuite(19, ("sid", "experimental"), "experimental").roots == (
        "postgresql-19", "postgresql-client-19", "libpq5")
