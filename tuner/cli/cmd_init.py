"""``tuner init DIR``: the samples a pip install starts from, written from the package (:mod:`tuner.cli.samples`)."""

from __future__ import annotations

from pathlib import Path

import click

from tuner.cli import samples

INIT_EXIT_TEXT = """\b
Exit status:
  0  written
  2  a sample exists there already (see --force), or DIR cannot be written"""


@click.command(context_settings={"max_content_width": 80})
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite samples that exist in DIRECTORY already.")
def init(directory: Path, force: bool) -> None:
    """Write tuner's samples into DIRECTORY, from the installed package.

    \b
      tuner.toml              the configuration, every setting commented
      tuner.service           tuner daemon as a hardened systemd unit; its
                              ExecStart is this installation's tuner
      prometheus-rules.yml    alert rules on the daemon's /metrics
      grafana-dashboard.json  a Grafana dashboard of the same series

    \b
    Then, for a daemon on the staging host (as root):
      install -D -m 0600 DIR/tuner.toml /etc/tuner/tuner.toml   # edit [target]
      tuner daemon --check-config --config /etc/tuner/tuner.toml
      install -D -m 0644 DIR/tuner.service /etc/systemd/system/tuner.service
      systemctl daemon-reload && systemctl enable --now tuner
    """
    written = samples.write(directory, force=force)
    for path, sample in written:
        click.echo(f"{path}  ({sample.what})")
    click.echo(f"tuner: wrote {len(written)} samples into {directory}; next: edit [target] in tuner.toml, then "
               "'tuner check --config tuner.toml'", err=True)


init.epilog = INIT_EXIT_TEXT
