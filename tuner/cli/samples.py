"""The samples a pip user starts from — tuner.toml, the systemd unit, the alert rules and the Grafana dashboard —
written by ``tuner init DIR`` from the package's own copy.

The wheel carries the repository's ``examples/`` as ``tuner/_examples`` (pyproject.toml maps it, as it maps
``policies/``); a source checkout reads ``examples/`` itself. ``examples/tuner.toml`` is the repository's
top-level ``tuner.toml``, kept identical by tests/unit/test_packaging.py. The unit's ``ExecStart`` names the
``tuner`` that writes it, so it runs this installation wherever its virtual environment is.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import ConfigError
from tuner.fs.atomic import atomic_write

UNIT_EXEC = "/opt/tuner/bin/tuner"  # the unit's ExecStart as shipped (docs/daemon.md installs into /opt/tuner)


def _samples_dir() -> Path:
    package = Path(__file__).resolve().parents[1]
    installed = package / "_examples"
    return installed if installed.is_dir() else package.parent / "examples"


SAMPLES_DIR = _samples_dir()


@dataclass(frozen=True)
class Sample:
    source: str  # under SAMPLES_DIR
    name: str  # as written into DIR
    what: str


SAMPLES = (
    Sample("tuner.toml", "tuner.toml", "the configuration, every setting commented"),
    Sample("systemd/tuner.service", "tuner.service", "tuner daemon as a hardened systemd service"),
    Sample("prometheus-rules.yml", "prometheus-rules.yml", "Prometheus alert rules on the daemon's /metrics"),
    Sample("grafana-dashboard.json", "grafana-dashboard.json", "a Grafana dashboard of the same series"),
)


def this_tuner() -> Path:
    """The ``tuner`` command of this installation: beside the running interpreter (a virtual environment's bin/),
    else the one on PATH."""
    beside = Path(sys.executable).parent / "tuner"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    return Path(sys.argv[0]).resolve()


def text_of(sample: Sample, *, tuner: Path) -> str:
    """A sample as ``tuner init`` writes it: the unit's ExecStart pointed at ``tuner``, the others as shipped."""
    text = (SAMPLES_DIR / sample.source).read_text()
    if sample.name == "tuner.service":
        text = text.replace(f"ExecStart={UNIT_EXEC} ", f"ExecStart={tuner} ")
    return text


def write(dest: Path, *, force: bool = False, tuner: Path | None = None) -> list[tuple[Path, Sample]]:
    """Write every sample into ``dest`` (created if missing). Raises :class:`ConfigError` before writing anything
    when one exists already (unless ``force``) or ``dest`` cannot be written."""
    exe = tuner or this_tuner()
    out = [(dest / s.name, s) for s in SAMPLES]
    if not force:
        there = [p for p, _ in out if p.exists()]
        if there:
            raise ConfigError(f"{there[0]} exists already; tuner init writes nothing over a file",
                              hint="give an empty directory, or --force to overwrite the samples")
    try:
        dest.mkdir(parents=True, exist_ok=True)
        for path, sample in out:
            atomic_write(path, text_of(sample, tuner=exe))
    except OSError as exc:
        raise ConfigError(f"cannot write the samples into {dest}: {exc.strerror or exc}",
                          hint="give a directory this user may write") from None
    return out
