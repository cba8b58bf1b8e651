"""``patroni/``: the server settings as a change to Patroni's dynamic configuration — ``patroni-config.yaml`` for
``patronictl edit-config --apply`` and ``patch-config.json``, the body of ``PATCH /config`` — and their rollback
twins. Patroni merges either into the configuration in its DCS (a key set to null is removed), writes the
parameters into every member's postgresql.conf and reloads it; a parameter that needs a restart leaves the
members ``pending_restart`` until ``patronictl restart``.

Values are strings (Patroni writes each one quoted into postgresql.conf). Provenance and evidence travel as YAML
comments only: the patch is merged into the cluster's dynamic configuration as it is, so a key of tuner's own
would become a key of the cluster's (``patronictl show-config``), which ``patroni --validate-config`` and
Patroni's schema do not know. ``patch-config.json`` (JSON has no comments) carries the parameters alone.

Parameters Patroni manages itself are refused with a sentence each (:data:`MANAGED`); tablespace and device
changes cannot be expressed here and are named in a comment.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from tuner.emit import changes as ch
from tuner.emit import yamldoc
from tuner.emit.twin import ApplyRollback
from tuner.report.model import Report

YAML_FILE = "patroni/patroni-config.yaml"
JSON_FILE = "patroni/patch-config.json"
WHAT = "Patroni's configuration"

# Parameters Patroni sets itself, from patroni 4.1's own source: postgresql/config.py ConfigHandler.CMDLINE_OPTIONS
# (the ones whose validator refuses every value, and hot_standby, always on; _process_postgresql_parameters drops
# them with a warning), the recovery parameters of postgresql/available_parameters/0_postgres.yml
# (recovery_parameters: written by Patroni into recovery.conf or postgresql.conf from its own state),
# synchronous_standby_names (get_server_parameters: set by Patroni in synchronous mode), and the file locations
# that come from its local configuration (postgresql.data_dir, config_dir; hba_file and ident_file are joined to it).
_FROM_LOCAL = "Patroni sets it from its local configuration (postgresql.listen, scope, data_dir, config_dir)"
_RECOVERY = "a recovery parameter: Patroni writes it from its own state (replicas, standby_cluster, bootstrap)"
MANAGED: dict[str, str] = {
    "listen_addresses": _FROM_LOCAL, "port": _FROM_LOCAL, "cluster_name": _FROM_LOCAL,
    "data_directory": _FROM_LOCAL, "config_file": _FROM_LOCAL, "hba_file": _FROM_LOCAL, "ident_file": _FROM_LOCAL,
    "hot_standby": "Patroni keeps it on (every member may become a replica)",
    "synchronous_standby_names": "Patroni sets it itself in synchronous mode (synchronous_mode in the DCS)",
    **{name: _RECOVERY for name in (
        "archive_cleanup_command", "pause_at_recovery_target", "primary_conninfo", "primary_slot_name",
        "promote_trigger_file", "recovery_end_command", "recovery_min_apply_delay", "recovery_target",
        "recovery_target_action", "recovery_target_inclusive", "recovery_target_lsn", "recovery_target_name",
        "recovery_target_time", "recovery_target_timeline", "recovery_target_xid", "restore_command",
        "standby_mode", "trigger_file")},
}
RESTART = ("needs a restart: Patroni marks the members pending_restart (patronictl list) until you restart them "
           "(patronictl restart CLUSTER)")


def patches(report: Report, *, rollback: bool = False) -> tuple[dict[str, Any], ch.ParameterSet]:
    """The dynamic-configuration patch (or its rollback) and the parameter set it came from."""
    ps = ch.parameter_set(report, WHAT, refuse=MANAGED, restart=RESTART)
    return {"postgresql": {"parameters": dict(ps.rollback if rollback else ps.apply)}}, ps


def render_yaml(report: Report, *, rollback: bool = False) -> str:
    patch, ps = patches(report, rollback=rollback)
    header = [f"patroni-config.yaml: {ch.provenance(report)}", ch.measured_on(report)]
    if ps.restart and not rollback:
        header.append(f"pending_restart after it: {', '.join(ps.restart)}")
    if rollback:
        header += [f"Rollback of session {report.session.id}: patronictl -c PATRONI_YML edit-config --apply "
                   "patroni-config.yaml CLUSTER (a null removes the key)."] + ps.rollback_notes
        if not ps.rollback:
            header.append("nothing to roll back.")
    else:
        header += ["Apply: patronictl -c PATRONI_YML edit-config --apply patroni-config.yaml CLUSTER (or PATCH "
                   "/config with patch-config.json); Patroni merges it into the dynamic configuration and reloads "
                   "every member.", ""] + ps.notes
        if not ps.apply:
            header.append(ch.empty(report, WHAT, "system"))
    return yamldoc.dump(patch, header=header)


def render_json(report: Report, *, rollback: bool = False) -> str:
    return json.dumps(patches(report, rollback=rollback)[0], indent=2, ensure_ascii=True) + "\n"


class Patroni(ApplyRollback):
    """Patroni's dynamic configuration: YAML for patronictl, JSON for PATCH /config, and their rollback twins."""

    name: ClassVar[str] = "patroni"
    parts = ((YAML_FILE, render_yaml), (JSON_FILE, render_json))
