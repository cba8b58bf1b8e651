"""``ansible/``: the changes as an Ansible vars file (``tuner-vars.yml``: the data and its evidence) and the
playbook that applies it (``tuner.yml``, community.postgresql); ``rollback/ansible/`` holds the same pair with
today's values.

- Server settings: ``postgresql_alter_system`` (PostgreSQL 14 and later; ``postgresql_set`` before), on every
  host of ``tuner_hosts`` — ALTER SYSTEM is not replicated. Each runs only where postgresql.auto.conf does not
  already say it (read from ``pg_file_settings``), so a second run reports ``ok``, a rollback's RESET too, and a
  setting that waits for a restart is not written again. The module reloads; a handler reloads again. Settings
  that wait for a restart (the module's ``restart_required``, ``pg_settings.pending_restart``) are named, and
  PostgreSQL is restarted only with ``-e tuner_restart=true``: one host at a time (``-e tuner_serial=N`` or
  ``"25%"`` widens it), standbys first and the primary last, each back up before the next, stopping at the first
  failure (a first play sorts the hosts by ``pg_is_in_recovery()``; one play then takes the standbys, then the
  primary, in ``serial`` batches).
- Tablespace options: ``ALTER TABLESPACE`` through ``postgresql_query``, on a primary only (it replicates; a
  standby, recognised by ``pg_is_in_recovery()``, is skipped), and only where ``pg_tablespace.spcoptions``
  differs.
- Readahead: the udev rule file of the udev format, copied to ``tuner_udev_rules_dir`` (default
  /etc/udev/rules.d); a handler reloads udev and triggers the tuned block devices, by kernel name, and no other
  (``-e tuner_udev_trigger=false`` leaves that to you).

Check mode (``--check --diff``) changes nothing: the modules report what they would do, reads still run.

Every string in the vars file that could hold a template is tagged ``!unsafe`` (:mod:`tuner.emit.yamldoc`):
Ansible renders ``{{ ... }}`` in the strings it is given, and names and values from outside (a tablespace's name)
must stay text. community.postgresql's ALTER SYSTEM
module writes a value between quotes without doubling them, so only plain values (:func:`quote.plain`) are
written for it; a change whose value is not plain is named instead.
"""

from __future__ import annotations

from functools import partial
from collections.abc import Callable
from typing import Any, ClassVar

from tuner.emit import changes as ch
from tuner.emit import quote, sql, udev, yamldoc
from tuner.emit.twin import ApplyRollback
from tuner.report.model import Recommendation, Report

VARS_FILE = "ansible/tuner-vars.yml"
PLAYBOOK_FILE = "ansible/tuner.yml"
RESET = "_RESET"  # postgresql_alter_system's value for ALTER SYSTEM RESET
WHAT = "the Ansible playbook"
STANDBYS, PRIMARIES = "tuner_standbys", "tuner_primaries"  # groups the first play sorts tuner_hosts into
_MODULE_RESERVED = frozenset({"_reset", "default"})  # values the modules read as "reset"

_AUTO_CONF = ("SELECT name, setting FROM pg_catalog.pg_file_settings "
              "WHERE sourcefile ~ '/postgresql[.]auto[.]conf$'")
_PENDING = "SELECT name FROM pg_catalog.pg_settings WHERE pending_restart AND name = ANY (%(names)s)"
_RECOVERY = "SELECT pg_catalog.pg_is_in_recovery() AS standby"
_SPCOPTIONS = (
    "SELECT CASE WHEN %(entry)s = '' "
    "THEN NOT EXISTS (SELECT 1 FROM unnest(t.spcoptions) AS o WHERE split_part(o, '=', 1) = %(option)s) "
    "ELSE coalesce(%(entry)s = ANY (t.spcoptions), false) END AS done "
    "FROM pg_catalog.pg_tablespace AS t WHERE t.spcname = %(tablespace)s")


def _module_value(value: int | str, what: str) -> str:
    text = quote.plain(value, what)
    if text.lower() in _MODULE_RESERVED:
        raise quote.Unrenderable(f"{what} {quote.shown(text)} is what the Ansible module reads as RESET")
    return text


def _setting(rec: Recommendation, report: Report, *, rollback: bool) -> dict[str, Any]:
    quote.conf_setting(rec.knob)  # the module writes the name into its statement as it is
    value = _module_value(rec.recommended, "the recommended value")
    back = RESET if rec.source == "default" else _module_value(rec.current, "today's value")
    return {"name": rec.knob, "value": back if rollback else value, "requires": rec.requires,
            "evidence": ch.evidence(rec, report)}


def _tablespace(rec: Recommendation, report: Report, *, rollback: bool) -> dict[str, Any]:
    apply, back = sql.apply_sql(rec), sql.rollback_sql(rec)
    if apply is None or back is None or rec.object is None:
        raise quote.Unrenderable(sql.not_rendered(rec) or f"no statement for {ch.label(rec)}")
    if rollback:
        entry = "" if rec.source == "server" else f"{rec.knob}={quote.setting_text(rec.current)}"
    else:
        entry = f"{rec.knob}={quote.setting_text(rec.recommended)}"
    return {"tablespace": rec.object, "option": rec.knob, "entry": entry, "statement": back if rollback else apply,
            "evidence": ch.evidence(rec, report)}


def _readahead(rec: Recommendation, report: Report, *, rollback: bool) -> dict[str, Any]:
    rule = udev.rule(rec, rollback=rollback)
    kb = quote.integer(rec.current if rollback else rec.recommended, "read_ahead_kb")
    name = quote.sysname(rec.device.name) if rec.device else ""  # rule() refused a recommendation without one
    return {"device": rec.object or "", "kernel_name": name, "read_ahead_kb": kb, "rule": rule,
            "evidence": ch.evidence(rec, report)}


def variables(report: Report, *, rollback: bool = False) -> tuple[dict[str, Any], list[str]]:
    """The vars file's data and the comment lines for what it does not carry (and why)."""
    settings: list[dict[str, Any]] = []
    tablespaces: list[dict[str, Any]] = []
    readahead: list[dict[str, Any]] = []
    notes: list[str] = []
    kinds: dict[str, tuple[list[dict[str, Any]], Callable[..., dict[str, Any]]]] = {
        "system": (settings, _setting), "tablespace": (tablespaces, _tablespace), "device": (readahead, _readahead)}
    for rec in ch.changes(report):
        into, make = kinds[rec.scope]
        item, why = quote.attempt(partial(make, rec, report, rollback=rollback))
        if item is None:
            notes.append(f"{ch.label(rec)}: not written{', so nothing to roll back' if rollback else ''}: {why}")
        else:
            into.append(item)
    s = report.session
    data = {
        "tuner_provenance": ch.provenance(report),
        "tuner_session": s.id,
        "tuner_action": "rollback" if rollback else "apply",
        "tuner_settings": settings,
        "tuner_tablespaces": tablespaces,
        "tuner_readahead": readahead,
        "tuner_udev_rules": udev.render(report, rollback=rollback) if readahead else "",
    }
    return yamldoc.unsafe(data), notes


def render_vars(report: Report, *, rollback: bool = False) -> str:
    data, notes = variables(report, rollback=rollback)
    header = [f"tuner-vars.yml: {ch.provenance(report)}", ch.measured_on(report)]
    if rollback:
        header.append(f"Rollback of session {report.session.id}: ansible-playbook -i INVENTORY tuner.yml (this "
                      "directory's); settings that were PostgreSQL's defaults are RESET.")
    else:
        header += ["Run: ansible-playbook -i INVENTORY tuner.yml --check --diff, then without --check. "
                   "Rollback: the same in rollback/ansible/.",
                   "Variables: tuner_hosts (default: group postgresql), tuner_login_user/_password/_host/"
                   "_unix_socket/_port/_db (a superuser: ALTER SYSTEM and pg_file_settings need one), tuner_become_user "
                   "(default postgres: the PostgreSQL tasks' user when become is on), tuner_restart (default false), "
                   "tuner_serial (default 1: hosts at a time, standbys first; give it with -e), tuner_postgresql_service, "
                   "tuner_udev_rules_dir, tuner_udev_trigger."]
    header.append("")
    header += [item["evidence"] for key in ("tuner_settings", "tuner_tablespaces", "tuner_readahead")
               for item in data[key]]
    header += notes
    if not any(data[k] for k in ("tuner_settings", "tuner_tablespaces", "tuner_readahead")):
        header.append("nothing to roll back." if rollback else ch.empty(report, WHAT))
    return yamldoc.dump(data, header=header)


_LOGIN = {
    "login_user": "{{ tuner_login_user | default('postgres') }}",
    "login_password": "{{ tuner_login_password | default(omit) }}",
    "login_host": "{{ tuner_login_host | default(omit) }}",
    "login_unix_socket": "{{ tuner_login_unix_socket | default(omit) }}",
    "login_port": "{{ tuner_login_port | default(5432) }}",
    "login_db": "{{ tuner_login_db | default('postgres') }}",
}
_CPG = "community.postgresql."


def _settings_task(module: str) -> dict[str, Any]:
    """The ALTER SYSTEM task: postgresql_alter_system (14+) or postgresql_set, where auto.conf differs."""
    if module == "postgresql_alter_system":
        args = {"param": "{{ item.name }}", "value": "{{ item.value }}"}
    else:  # postgresql_set: value 'default' removes the line from postgresql.auto.conf
        args = {"name": "{{ item.name }}", "value": f"{{{{ 'default' if item.value == '{RESET}' else item.value }}}}"}
    return {
        "name": "tuner | ALTER SYSTEM where postgresql.auto.conf does not say it already",
        _CPG + module: args,
        "loop": "{{ tuner_settings }}",
        "loop_control": {"label": "{{ item.name }} = {{ item.value }}"},
        "when": ("(tuner_auto_conf.query_result | default({}) | selectattr('name', 'equalto', item.name) "
                 f"| map(attribute='setting') | list) != ([] if item.value == '{RESET}' else [item.value | string])"),
        "register": "tuner_altered",
        "notify": "tuner | reload PostgreSQL",
    }


def playbook(report: Report, *, rollback: bool = False) -> list[dict[str, Any]]:
    module = "postgresql_alter_system" if report.target.server_version_num >= 140000 else "postgresql_set"
    read_only = {"changed_when": False, "check_mode": False}
    restart_for = (
        "{{ ((tuner_pending.query_result | default({}) | map(attribute='name') | list)"
        " + (tuner_altered.results | default([]) | selectattr('changed', 'defined') | selectattr('changed')"
        " | map(attribute='item') | selectattr('requires', 'equalto', 'restart') | map(attribute='name') | list)"
        " + (tuner_altered.results | default([]) | selectattr('restart_required', 'defined')"
        " | selectattr('restart_required') | map(attribute='item.name') | list)) | unique }}")
    tasks: list[dict[str, Any]] = [
        {"name": "tuner | read postgresql.auto.conf", _CPG + "postgresql_query": {"query": _AUTO_CONF},
         "register": "tuner_auto_conf", "when": "tuner_settings | length > 0", **read_only},
        _settings_task(module),
        {"name": "tuner | find the settings that wait for a restart",
         _CPG + "postgresql_query": {"query": _PENDING,
                                     "named_args": {"names": "{{ tuner_settings | map(attribute='name') | list }}"}},
         "register": "tuner_pending", "when": "tuner_settings | length > 0", **read_only},
        {"name": "tuner | collect them", "ansible.builtin.set_fact": {"tuner_restart_for": restart_for}},
        {"name": "tuner | say which settings wait for a restart (restart_required)",
         "ansible.builtin.debug": {"msg": "PostgreSQL must restart for {{ tuner_restart_for | join(', ') }} to "
                                          "take effect: restart it yourself, or run again with -e tuner_restart=true"},
         "when": "tuner_restart_for | length > 0"},
        {"name": "tuner | restart PostgreSQL (only with -e tuner_restart=true)",
         "ansible.builtin.service": {"name": "{{ tuner_postgresql_service | default('postgresql') }}",
                                     "state": "restarted"},
         "register": "tuner_restarted",
         "when": "tuner_restart_for | length > 0 and (tuner_restart | default(false) | bool)"},
        {"name": "tuner | wait until it accepts connections again, before the next host",
         _CPG + "postgresql_ping": {}, "register": "tuner_ping", "until": "tuner_ping.is_available",
         "retries": 60, "delay": 2, "when": "tuner_restarted is changed and not ansible_check_mode"},
        {"name": "tuner | read the tablespaces' options",
         _CPG + "postgresql_query": {"query": _SPCOPTIONS, "named_args": {
             "entry": "{{ item.entry }}", "option": "{{ item.option }}", "tablespace": "{{ item.tablespace }}"}},
         "loop": "{{ tuner_tablespaces }}", "loop_control": {"label": "{{ item.option }}"},
         "register": "tuner_tablespace_state",
         "when": "tuner_tablespaces | length > 0 and not tuner_recovery.query_result[0].standby", **read_only},
        {"name": "tuner | ALTER TABLESPACE on the primary, where its options differ",
         _CPG + "postgresql_query": {"query": "{{ item.item.statement }}"},
         "loop": "{{ tuner_tablespace_state.results | default([]) }}",
         "loop_control": {"label": "{{ item.item.option }}"},
         "when": "item.query_result is defined and (item.query_result | length == 0 "
                 "or not item.query_result[0].done)"},
        {"name": "tuner | readahead: the udev rule (as root)",
         "ansible.builtin.copy": {"content": "{{ tuner_udev_rules }}",
                                  "dest": "{{ tuner_udev_rules_dir | default('/etc/udev/rules.d') }}/"
                                          "99-tuner-readahead.rules",
                                  "mode": "0644"},
         "when": "(tuner_udev_rules | default('', true)) | length > 0", "notify": "tuner | apply udev rules"},
    ]
    handlers: list[dict[str, Any]] = [
        {"name": "tuner | reload PostgreSQL",
         _CPG + "postgresql_query": {"query": "SELECT pg_catalog.pg_reload_conf()"},
         "when": "not ansible_check_mode"},
        {"name": "tuner | reload udev rules", "ansible.builtin.command": "udevadm control --reload-rules",
         "listen": "tuner | apply udev rules", "when": "tuner_udev_trigger | default(true) | bool"},
        # Only the devices the rules are for: a bare trigger replays "change" on every block device of the host.
        {"name": "tuner | trigger the tuned block devices",
         "ansible.builtin.command": {"argv": ["udevadm", "trigger", "--action=change", "--subsystem-match=block",
                                              "--sysname-match={{ item.kernel_name }}"]},
         "loop": "{{ tuner_readahead }}", "loop_control": {"label": "{{ item.kernel_name }}"},
         "listen": "tuner | apply udev rules", "when": "tuner_udev_trigger | default(true) | bool"},
    ]
    # With become (root, for the udev rule), PostgreSQL tasks run as tuner_become_user: peer authentication over
    # the local socket wants the postgres OS user. Without become, become_user changes nothing.
    as_postgres = "{{ tuner_become_user | default('postgres') }}"
    for task in [*tasks, *handlers]:
        if any(key.startswith(_CPG) for key in task):
            task["become_user"] = as_postgres
    login = {_CPG + m: dict(_LOGIN) for m in (module, "postgresql_query", "postgresql_ping")}
    what = f"tuner {'rollback' if rollback else 'apply'}: server settings, tablespace options, readahead"
    # One play over both groups: a host pattern's union keeps its order (the standbys, then the primary), and
    # serial cuts that order into batches, so the primary's batch comes after every standby's.
    return [_roles_play(login, as_postgres), {
        "name": f"{what} (the standbys first, then the primary; tuner_serial at a time)",
        "hosts": f"{STANDBYS}:{PRIMARIES}",
        "serial": "{{ tuner_serial | default(1) }}",
        "max_fail_percentage": 0,
        "gather_facts": False,
        "vars_files": ["tuner-vars.yml"],
        "module_defaults": login,
        "tasks": tasks,
        "handlers": handlers}]


def _roles_play(login: dict[str, Any], as_postgres: str) -> dict[str, Any]:
    """The first play: sort tuner_hosts into standbys and primaries by ``pg_is_in_recovery()``. The play after
    it runs on the standbys, then on the primary, a batch of tuner_serial hosts at a time, and stops at the first
    failure: a restart never reaches the primary before every standby is back, and never takes every server
    down at once. Standbys first is also the order PostgreSQL asks for when a setting a standby must have at
    least as high as its primary is raised (docs, "Hot Standby", Administrator's Overview)."""
    read_only = {"changed_when": False, "check_mode": False}
    return {
        "name": "tuner | which hosts are standbys (they go first) and which the primary (it goes last)",
        "hosts": "{{ tuner_hosts | default('postgresql') }}",
        "gather_facts": False,
        "module_defaults": {_CPG + "postgresql_query": dict(_LOGIN)},
        "tasks": [
            {"name": "tuner | is this server in recovery", _CPG + "postgresql_query": {"query": _RECOVERY},
             "register": "tuner_recovery", "become_user": as_postgres, **read_only},
            {"name": "tuner | group it by role",
             "ansible.builtin.group_by": {
                 "key": f"{{{{ '{STANDBYS}' if tuner_recovery.query_result[0].standby else '{PRIMARIES}' }}}}"},
             "changed_when": False},
        ],
    }


def render_playbook(report: Report, *, rollback: bool = False) -> str:
    header = [f"tuner.yml: {ch.provenance(report)}",
              f"The playbook for tuner-vars.yml beside it ({'rollback' if rollback else 'apply'}); "
              "ansible-playbook -i INVENTORY tuner.yml [--check --diff].",
              "Needs: the community.postgresql collection 3.13 or later (postgresql_alter_system), which the "
              "'ansible' package bundles (pip install ansible; with ansible-core alone: ansible-galaxy collection "
              "install community.postgresql), and psycopg2 on the managed hosts."]
    return yamldoc.dump(playbook(report, rollback=rollback), header=header)


class Ansible(ApplyRollback):
    """An Ansible vars file and playbook (community.postgresql), and their rollback twins."""

    name: ClassVar[str] = "ansible"
    parts = ((VARS_FILE, render_vars), (PLAYBOOK_FILE, render_playbook))
