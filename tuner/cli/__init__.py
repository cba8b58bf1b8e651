"""The ``tuner`` command line: the group and its options here, one module per command group beside it."""

from __future__ import annotations

import click

from tuner import __version__
from tuner.cli.cmd_check import check
from tuner.cli.cmd_config import config
from tuner.cli.cmd_daemon import daemon
from tuner.cli.cmd_init import init
from tuner.cli.cmd_recommend import recommend
from tuner.cli.cmd_restore import prune, restore
from tuner.cli.cmd_store import diff, export, history, show
from tuner.cli.cmd_workload import workload
from tuner.cli.common import CONFIG_TEXT, EXIT_SUMMARY, Group


__all__ = ["main", "recommend", "restore", "prune", "history", "show", "diff", "export", "config", "daemon", "check",
           "init", "workload"]

@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 80})
@click.version_option(__version__, prog_name="tuner")
def main() -> None:
    """tuner — measured I/O settings for PostgreSQL.

    tuner probes PostgreSQL's I/O settings on a staging replica (a hot standby, or a writable clone
    marked tuner.role = 'staging'), searches them with Bayesian optimisation, confirms the winner
    against today's settings with paired, interleaved trials and a 95 % confidence interval, and
    emits ALTER SYSTEM statements with their evidence and a rollback — or says "keep what you have"
    when the evidence is not there. It never probes a primary.

    \b
    Start here:
      tuner recommend --sandbox       try it on a PostgreSQL tuner starts itself
      tuner check --dsn 'host=standby1 dbname=app'   what a session would do
      tuner workload show             the statements pg_stat_statements
                                      would give a session, and why not
      tuner recommend --dsn 'host=standby1 dbname=app' --format sql
      tuner config validate --print   the effective configuration
      tuner restore                   put back what a killed session changed
      tuner history                   stored sessions (then show, diff, prune)
      tuner daemon --config /etc/tuner/tuner.toml    run it as a service
      tuner init DIR                  write a sample tuner.toml, systemd unit,
                                      alert rules and dashboard into DIR

    \b
    Shell completion (click's own): add a line to the shell's start-up file
      ~/.bashrc:  eval "$(_TUNER_COMPLETE=bash_source tuner)"
      ~/.zshrc:   eval "$(_TUNER_COMPLETE=zsh_source tuner)"
      ~/.config/fish/config.fish:  _TUNER_COMPLETE=fish_source tuner | source
    """


for _command in (recommend, check, restore, prune, history, show, diff, export, config, daemon, init, workload):
    main.add_command(_command)
main.epilog = CONFIG_TEXT + "\n\n" + EXIT_SUMMARY
