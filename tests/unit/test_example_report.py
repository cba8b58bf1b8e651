"""Issue #57 item 6: the example report's page and screenshot in docs/ stay renderings of the example report
(tests/fixtures/reports/example-report.json). The page must be what tuner's HTML exporter renders from it now, byte
for byte; the screenshot, which a fresh one cannot match byte for byte (fonts, Chromium versions), must be the one
scripts/render-example-report took of that page — docs/example-report.sha256 records both files' hashes in the
run that wrote them. A failure here: run scripts/render-example-report and commit docs/example-report.*."""

from __future__ import annotations

from tests.support import example_report as ex

FIX = "run scripts/render-example-report and commit docs/example-report.*"


def test_the_committed_page_is_what_the_html_exporter_renders_now() -> None:
    assert ex.HTML.read_text(encoding="utf-8") == ex.render_html(), f"docs/example-report.html is stale: {FIX}"


def test_the_screenshot_was_taken_of_the_committed_page() -> None:
    hashes = ex.recorded()
    assert set(hashes) == {ex.HTML.name, ex.PNG.name}
    assert hashes[ex.HTML.name] == ex.sha256(ex.HTML), f"the page changed since its screenshot was taken: {FIX}"
    assert hashes[ex.PNG.name] == ex.sha256(ex.PNG), f"docs/example-report.png was not written by the script: {FIX}"


def test_the_screenshot_is_a_png_at_the_script_s_size() -> None:
    head = ex.PNG.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")) == (ex.WIDTH, ex.HEIGHT)


def test_docs_keep_only_the_renderings() -> None:
    assert not (ex.ROOT / "docs" / "example-report.json").exists()  # the input lives with the tests' reports
    assert ex.SOURCE.is_file()
