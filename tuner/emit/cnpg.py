"""``cnpg/cluster-patch.yaml``: the server settings as a merge patch for a CloudNativePG ``Cluster``
(``postgresql.cnpg.io/v1``, ``spec.postgresql.parameters``, every value a string), and its rollback twin.

``kubectl patch cluster NAME --type merge --patch-file cluster-patch.yaml``: the operator writes the parameters
into every instance's configuration and reloads it; a parameter that needs a restart makes it restart the
instances one at a time. A key set to null (the rollback of a value that was PostgreSQL's default) is removed.

The parameters the operator sets itself are refused with a sentence (:data:`FIXED`); tablespace and device
changes cannot be expressed in a Cluster's parameters and are named in a comment.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tuner.emit import changes as ch
from tuner.emit import yamldoc
from tuner.emit.twin import ApplyRollback
from tuner.report.model import Report

FILE = "cnpg/cluster-patch.yaml"
WHAT = "a CloudNativePG Cluster"
API_VERSION = "postgresql.cnpg.io/v1"
ANNOTATION = "tuner/managed-by"

# The parameters CloudNativePG does not let a Cluster set: the union of its documentation's "Fixed parameters"
# (docs/src/postgresql_conf.md, "Users are not allowed to set the following configuration parameters in the
# postgresql section") and its source's FixedConfigurationParameters (pkg/postgres/configuration.go, "fixed" —
# managed by the operator — and "blocked" — must keep its default for the operator to work). Releases differ
# (newer ones validate wal_level and wal_log_hints instead of fixing them), so a name in either list is refused.
FIXED = frozenset("""
    allow_alter_system allow_system_table_mods archive_cleanup_command archive_command archive_mode archive_timeout
    bonjour bonjour_name cluster_name config_file data_directory data_sync_retry event_source external_pid_file
    full_page_writes hba_file hot_standby huge_pages ident_file jit_provider listen_addresses log_destination
    log_directory log_file_mode log_filename log_rotation_age log_rotation_size log_truncate_on_rotation
    logging_collector pg_failover_slots.primary_dsn pg_failover_slots.standby_slot_names port primary_conninfo
    primary_slot_name promote_trigger_file recovery_end_command recovery_min_apply_delay recovery_target
    recovery_target_action recovery_target_inclusive recovery_target_lsn recovery_target_name recovery_target_time
    recovery_target_timeline recovery_target_xid restart_after_crash restore_command shared_preload_libraries ssl
    ssl_ca_file ssl_cert_file ssl_ciphers ssl_crl_file ssl_dh_params_file ssl_ecdh_curve ssl_key_file
    ssl_max_protocol_version ssl_min_protocol_version ssl_passphrase_command ssl_passphrase_command_supports_reload
    ssl_prefer_server_ciphers stats_temp_directory synchronized_standby_slots synchronous_standby_names
    syslog_facility syslog_ident syslog_sequence_numbers syslog_split_messages temp_tablespaces
    unix_socket_directories unix_socket_group unix_socket_permissions wal_level wal_log_hints
""".split())
REFUSED = {name: "a fixed parameter of CloudNativePG: the operator sets it, and its webhook rejects a Cluster "
                 "that sets it" for name in FIXED}
RESTART = ("needs a restart: after this change the operator restarts the instances one at a time (a rolling "
           "restart; .spec.primaryUpdateStrategy and .spec.primaryUpdateMethod decide how the primary goes)")


def manifest(api_version: str, kind: str, report: Report, parameters: dict[str, Any], *,
             rollback: bool) -> dict[str, Any]:
    """A merge patch of ``spec.postgresql.parameters`` with the provenance as an annotation (removed on rollback)."""
    note = None if rollback else ch.provenance(report)
    return {"apiVersion": api_version, "kind": kind, "metadata": {"annotations": {ANNOTATION: note}},
            "spec": {"postgresql": {"parameters": parameters}}}


def header(report: Report, ps: ch.ParameterSet, *, name: str, what: str, command: str, rollback: bool) -> list[str]:
    lines = [f"{name}: {ch.provenance(report)}", ch.measured_on(report)]
    if rollback:
        lines += [f"Rollback of session {report.session.id}: {command} (a null removes the key)."] + ps.rollback_notes
        if not ps.rollback:
            lines.append("nothing to roll back.")
        return lines
    lines += [f"Apply: {command}; every value is a string.", ""] + ps.notes
    if not ps.apply:
        lines.append(ch.empty(report, what, "system"))
    return lines


def render(report: Report, *, rollback: bool = False) -> str:
    ps = ch.parameter_set(report, WHAT, refuse=REFUSED, restart=RESTART)
    params: dict[str, Any] = dict(ps.rollback if rollback else ps.apply)
    command = ("kubectl patch cluster NAME --type merge --patch-file cluster-patch.yaml (the operator reloads "
               "every instance)")
    return yamldoc.dump(manifest(API_VERSION, "Cluster", report, params, rollback=rollback),
                        header=header(report, ps, name="cluster-patch.yaml", what=WHAT, command=command,
                                      rollback=rollback))


class Cnpg(ApplyRollback):
    """A merge patch for a CloudNativePG Cluster, and its rollback twin."""

    name: ClassVar[str] = "cnpg"
    parts = ((FILE, render),)
