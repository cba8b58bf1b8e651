"""tests/fixtures/reports/example-report.json rendered in every format, byte for byte as stored
(tests/fixtures/golden/example/; TUNER_UPDATE_GOLDEN=1 rewrites them): a refactor of the emitters must leave every
file they write as it was. (docs/example-report.html is the same rendering, kept for readers:
tests/unit/test_example_report.py, scripts/render-example-report.)

Files over 64 KB (the HTML page, the JSON report) are stored as their SHA-256 only, to keep the repository small;
tests/unit/test_emit_html.py and the JSON tests say what changed in them."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tuner import emit
from tuner.emit.json import parse

ROOT = Path(__file__).parent.parent.parent
GOLDEN = ROOT / "tests" / "fixtures" / "golden" / "example"
UPDATE = os.environ.get("TUNER_UPDATE_GOLDEN") == "1"
LARGE = 64 * 1024
DIGEST = ".sha256"


def _stored_form(body: str) -> tuple[str, str]:
    """The suffix and text under which ``body`` is stored."""
    if len(body.encode()) > LARGE:
        return DIGEST, hashlib.sha256(body.encode()).hexdigest() + "\n"
    return "", body


@pytest.mark.parametrize("fmt", sorted(emit.EMITTERS))
def test_the_example_report_renders_as_stored(fmt: str) -> None:
    files = emit.render(parse((ROOT / "tests" / "fixtures" / "reports" / "example-report.json").read_text()), fmt)
    root = GOLDEN / fmt
    expected = {name + _stored_form(body)[0]: _stored_form(body)[1] for name, body in files.items()}
    if UPDATE:
        for name, text in expected.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
    stored = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert stored == set(expected), f"{fmt} writes other files; rerun with TUNER_UPDATE_GOLDEN=1 if intended"
    for name, text in expected.items():
        assert text == (root / name).read_text(), f"{fmt}: {name} changed; rerun with TUNER_UPDATE_GOLDEN=1"


def test_every_export_only_format_renders_through_the_apply_rollback_base() -> None:
    from tuner.emit.twin import ROLLBACK_DIR, ApplyRollback

    report = parse((ROOT / "tests" / "fixtures" / "reports" / "example-report.json").read_text())
    for name, emitter in emit.EMITTERS.items():
        if not getattr(type(emitter), "export_only", False):
            continue
        assert isinstance(emitter, ApplyRollback), name
        files = list(emit.render(report, name))
        applied = [f for f, _ in emitter.parts]
        assert files == applied + [ROLLBACK_DIR + f for f in applied], name
