"""Issue 59, item 2: whether the files on disk are what the server loaded is read from what the server reports
(tuner.target.loaded), never from a modification time. Pure: rows as config_lines.sql returns them."""

from __future__ import annotations

from typing import Any

import pytest

from tuner.target.loaded import same_value, unloaded


def row(**kw: Any) -> dict[str, Any]:
    base = {"name": "work_mem", "source": "configuration file", "vartype": "integer", "unit": "kB",
            "loaded": "4096", "loaded_file": "/d/postgresql.conf", "loaded_line": 7, "on_disk": "4MB",
            "on_disk_file": "/d/postgresql.conf", "on_disk_line": 7}
    return base | kw


def test_files_that_say_what_was_loaded_show_nothing() -> None:
    assert unloaded([row(), row(name="DateStyle", vartype="string", unit=None, loaded="ISO, MDY", on_disk="iso")]) \
        is None


@pytest.mark.parametrize("changed, says", [
    ({"on_disk_line": 8}, "work_mem was loaded from /d/postgresql.conf:7, and is set at /d/postgresql.conf:8 now"),
    ({"on_disk": "8MB"}, "work_mem is '8MB' at /d/postgresql.conf:7, and the server loaded '4096' (in kB)"),
    ({"on_disk_file": None, "on_disk_line": None}, "work_mem was loaded from /d/postgresql.conf:7, which no "
                                                   "longer sets it"),
    ({"source": "default", "loaded_file": None, "loaded_line": None}, "work_mem is set at /d/postgresql.conf:7, "
                                                                       "and the server has its default"),
])
def test_a_line_moved_changed_removed_or_added_shows(changed: dict[str, Any], says: str) -> None:
    assert unloaded([row(), row(**changed)]) == says


def test_without_the_file_and_line_a_changed_value_still_shows() -> None:
    # (pg_settings hides sourcefile from roles without pg_read_all_settings)
    assert unloaded([row(loaded_file=None, loaded_line=None, on_disk="5MB")]) is not None
    assert unloaded([row(loaded_file=None, loaded_line=None)]) is None


@pytest.mark.parametrize("text, loaded, vartype, unit, same", [
    ("4MB", "4096", "integer", "kB", True), ("128MB", "16384", "integer", "8kB", True),
    ("1GB", "1024", "integer", "MB", True), ("5min", "300", "integer", "s", True), ("300", "300", "integer", "s", True),
    ("2ms", "2", "real", "ms", True), ("4.0", "4", "real", None, True), ("0.5", "4", "real", None, False),
    ("tr", "on", "bool", None, True), ("no", "on", "bool", None, False), ("TRUE", "on", "bool", None, True),
    ("on", "pglz", "enum", None, True),  # an alias the server spells its own way: not compared
    ("4 furlongs", "4096", "integer", "kB", True),  # a text this cannot read: the line decides
])
def test_values_are_compared_in_the_settings_own_unit(text: str, loaded: str, vartype: str, unit: str | None,
                                                      same: bool) -> None:
    assert same_value(text, loaded, vartype, unit) is same
