"""SQL lives in .sql files next to the code that runs it, one query per file, loaded once."""

from __future__ import annotations

from functools import cache
from pathlib import Path


@cache
def load(package_dir: str, name: str) -> str:
    """Text of ``<package_dir>/sql/<name>.sql``."""
    return (Path(package_dir) / "sql" / f"{name}.sql").read_text(encoding="utf-8")
