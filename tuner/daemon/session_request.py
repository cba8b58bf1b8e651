"""What a ``POST /v1/sessions`` asks for, checked once at the edge: the target, the kind and the families — only
families the target's configuration allows (``[tuner] families`` or its ``[[daemon.targets]] families``): a
family left out there writes where its operator did not agree to (readahead: sysfs as root on the host's disk).
Equal requests become equal runs, so the queue holds each piece of work once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.errors import DaemonError
from tuner.families import REGISTRY

FIELDS = ("target", "families", "kind", "in_window")


@dataclass(frozen=True)
class SessionRequest:
    target: str
    kind: str  # "session" (all the target's families), "reprobe" (some of them) or "revalidate"
    families: tuple[str, ...]  # the target's own order, no repeats; empty for all of them
    forced: bool  # run now, in or out of the window


def parse(body: Mapping[str, Any], targets: Mapping[str, Sequence[str]]) -> SessionRequest:
    """The request ``body`` (a JSON object) for one of ``targets`` (name → the families it allows); raises
    :class:`DaemonError` (HTTP 400) with one sentence."""
    unknown = set(body) - set(FIELDS)
    if unknown:
        raise DaemonError(f"unknown field {_shown(sorted(unknown)[0])} in the request",
                          hint='fields: target, families, kind ("session" or "revalidate"), in_window (true: '
                               'wait for a maintenance window instead of running now)')
    if not isinstance(body.get("in_window", False), bool):
        raise DaemonError("in_window must be true or false")
    # Only a request without "target" means the first target: 0, "" or null name none (a client's bug, not a
    # choice), and running the default target for them would probe a server nobody asked for.
    name = body["target"] if "target" in body else next(iter(targets))
    if not isinstance(name, str) or name not in targets:
        said = (f"no target {_shown(name)}" if isinstance(name, str) and name
                else "no target: target is empty" if name == ""
                else f"no target: target is {_json_kind(name)}, not a target's name")
        raise DaemonError(said, hint=f"targets: {', '.join(targets)} (leave target out for {next(iter(targets))})")
    kind = body.get("kind", "session")
    if not isinstance(kind, str) or kind not in ("session", "revalidate"):
        raise DaemonError(f"kind must be 'session' or 'revalidate', not {_shown(kind)}")
    asked = body.get("families") or []
    known = REGISTRY.names()
    if (not isinstance(asked, list) or len(asked) > 4 * len(known)
            or any(not isinstance(f, str) or f not in known for f in asked)):
        raise DaemonError("families must be a list of family names", hint=f"families: {', '.join(known)}")
    allowed = tuple(targets[name])
    excluded = [f for f in dict.fromkeys(asked) if f not in allowed]
    if excluded:
        raise DaemonError(f"target {name} does not allow the family {excluded[0]}",
                          hint=f"its families: {', '.join(allowed)} (set in its configuration)")
    families = tuple(f for f in allowed if f in asked)
    if set(families) == set(allowed) or kind == "revalidate":
        # All of the target's families is the same work as a plain session; a re-validation probes what its
        # pins name. Either way the queue holds it once.
        families = ()  # all of the target's families: the same work as a plain session, queued once
    return SessionRequest(name, "reprobe" if kind == "session" and families else kind, families,
                          not body.get("in_window", False))


def allowed(families: Sequence[str], configured: Sequence[str], target: str, *,
            kind: str = "session") -> tuple[str, ...]:
    """The one check of what a target allows, made as every run starts — requested over the API, scheduled, queued
    by drift, a re-validation alike (:meth:`tuner.daemon.worker.Worker._session`): of the ``families`` a run names
    (a re-validation: its pins' families), those the target's configuration allows now, in its order; all of them
    when a session names none. Raises :class:`DaemonError` when none is left: the configuration may have changed
    since the run was queued, and a re-validation may find only recommendations of families the target excludes
    (a family left out writes where its operator did not agree to)."""
    if not families and kind != "revalidate":
        return tuple(configured)
    kept = tuple(f for f in configured if f in families)
    if kept:
        return kept
    if kind == "revalidate":
        raise DaemonError(f"nothing to re-validate on target {target}: no accepted recommendation tuner can "
                          f"re-validate belongs to a family it allows ({', '.join(configured)})",
                          hint="tuner re-validates effective_io_concurrency and the WAL settings, each only on a "
                               "target whose families include its own")
    raise DaemonError(f"target {target} no longer allows the families this run asked for "
                      f"({', '.join(families)})", hint=f"its families: {', '.join(configured)}")


def _json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words (a client sent it as JSON)."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else "true or false"
    return "a number" if isinstance(value, int | float) else "a list" if isinstance(value, list) else "an object"


def _shown(value: Any) -> str:
    """A client's value in a sentence: short strings as given, anything else by its type (a 20,000-digit number or
    a nested object would make the answer as large as the request)."""
    if isinstance(value, str) and len(value) <= 64 and value.isprintable():
        return repr(value)
    return f"(a {type(value).__name__})" if not isinstance(value, str) else "(a long or unprintable string)"
