"""The example report's renderings in docs/ — the page README.md and docs/guide.md link to, and its screenshot —
made from one input, the report a real sandbox session wrote (tests/fixtures/reports/example-report.json, beside
the other reports the tests read; docs/ keeps only what a reader opens).

    scripts/render-example-report        # (this module's main) writes the three files below

- docs/example-report.html: tuner's own HTML exporter on the input, as `tuner export --format html --from` prints it;
- docs/example-report.png: headless Chromium's screenshot of that page (tests/support/chromium.py), its first
  WIDTH x HEIGHT CSS pixels: the verdict, the recommendations and the first figures;
- docs/example-report.sha256: both files' SHA-256 (``sha256sum -c`` reads it in docs/), written in the same run.

tests/unit/test_example_report.py fails when the page differs from what the exporter renders now, or when either
file differs from what the hashes record: a PNG cannot be compared with a fresh screenshot byte for byte (fonts,
Chromium versions), so the hash file ties the committed screenshot to the page it was taken of.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "fixtures" / "reports" / "example-report.json"
HTML = ROOT / "docs" / "example-report.html"
PNG = ROOT / "docs" / "example-report.png"
HASHES = ROOT / "docs" / "example-report.sha256"
WIDTH, HEIGHT = 1280, 2400


def render_html() -> str:
    """The page tuner's HTML exporter renders from the example report now."""
    from tuner import emit
    from tuner.emit.json import parse

    files = emit.render(parse(SOURCE.read_text(encoding="utf-8")), "html")
    return next(iter(files.values()))  # the main file first: the page


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def hashes_text() -> str:
    """The hash file's text for the committed page and screenshot (``sha256sum``'s format)."""
    return "".join(f"{sha256(p)}  {p.name}\n" for p in (HTML, PNG))


def recorded() -> dict[str, str]:
    """File name → SHA-256, as the hash file records them."""
    out = {}
    for line in HASHES.read_text(encoding="utf-8").splitlines():
        digest, name = line.split(maxsplit=1)
        out[name.lstrip("*")] = digest
    return out


def main() -> int:
    from tests.support import chromium

    if chromium.binary() is None:
        print("render-example-report: chromium is not installed (Debian: apt-get install --no-install-recommends "
              "chromium fonts-dejavu-core)", file=sys.stderr)
        return 1
    HTML.write_text(render_html(), encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="tuner-example-") as tmp:
        shot = chromium.screenshot(HTML, Path(tmp) / "shot.png", width=WIDTH, height=HEIGHT)
        PNG.write_bytes(shot.read_bytes())
    colours = chromium.distinct_colours(PNG)
    if colours < 16:
        print(f"render-example-report: the screenshot has {colours} colours: a blank page?", file=sys.stderr)
        return 1
    HASHES.write_text(hashes_text(), encoding="utf-8")
    for path in (HTML, PNG, HASHES):
        print(f"{path.relative_to(ROOT)}  {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
