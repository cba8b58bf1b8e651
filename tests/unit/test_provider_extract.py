"""Unpacking a PostgreSQL tarball (tuner/sandbox/provider.py ``_extract``) on a Python without PEP 706's
extraction filters (3.11.0-3.11.3): links inside the tree are kept, anything reaching outside it is refused."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from tuner.errors import SandboxError
from tuner.sandbox.provider import _extract


def _tarball(*entries: tuple[str, str | None]) -> tarfile.TarFile:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, link in entries:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
            tar.addfile(info, None if link is not None else io.BytesIO(b""))
    buf.seek(0)
    return tarfile.open(fileobj=buf)


@pytest.fixture(autouse=True)
def _no_extraction_filters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(tarfile, "tar_filter")


def test_links_within_the_tree_are_unpacked(tmp_path: Path) -> None:
    _extract(_tarball(("pg/lib/libpq.so.5", None), ("pg/lib/libpq.so", "libpq.so.5"),
                      ("pg/bin/libpq", "../lib/libpq.so")), tmp_path)
    assert (tmp_path / "pg/bin/libpq").resolve() == (tmp_path / "pg/lib/libpq.so.5").resolve()


@pytest.mark.parametrize("entry", [("../evil", None), ("/abs", None), ("pg/l", "../../etc/passwd"),
                                   ("pg/l", "/etc/passwd")])
def test_a_path_outside_the_tree_is_refused(tmp_path: Path, entry: tuple[str, str | None]) -> None:
    with pytest.raises(SandboxError, match="the PostgreSQL tarball holds a path outside itself"):
        _extract(_tarball(entry), tmp_path / "root")
    assert not (tmp_path / "evil").exists()
