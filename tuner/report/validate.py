"""Everything tuner reads back as a report is checked like user input before anything is rendered from it.

A report reaches the emitters from a file (``tuner export --from``), from the store (``show``, ``export``, the
daemon's API — and a shared ``[store] url`` is written by every tuner of a fleet) or from memory (``recommend``).
What the emitters write is copied to servers and hosts by config management and acted on as the database
superuser or as root, so a report may say only what tuner itself produces:

- settings from the knob catalogue (exact names; screened ones such as wal_compression included), in a scope the
  catalogue gives them, on a server version that has them, with values of their type inside their range (an
  enum's values) — never archive_command, shared_preload_libraries and the like, nor a durability setting;
- no setting twice for one object;
- a device-scope recommendation names one device consistently (``/dev/NAME``, ``/sys/block/NAME/…``) and matches
  it by udev keys of a shape tuner's device discovery produces (:data:`tuner.hostfacts.blockdev.MATCH_SHAPES`): no
  ``PROGRAM``, ``IMPORT{program}`` or ``RUN``, no glob but tuner's own ``loop*``;
- the schema version this tuner writes;
- no control characters or line breaks in the names and identities that reach an output as data.

Free text (reasons, descriptions, failure messages) is not refused here: a genuine report may carry a server's
multi-line error, and every emitter writes such text through :mod:`tuner.emit.quote`.

:func:`check` is called by :func:`tuner.emit.render` (every emitter, so ``recommend``, ``show``, ``export`` and the
daemon's served formats) and by the store when it reads a report back.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from tuner.sandbox.device.profile import ProfileError, parse_profile
from tuner.errors import ConfigError
from tuner.knobs import catalog
from tuner.hostfacts.blockdev import LOOP_KERNEL, MATCH_SHAPES
from tuner.report.model import SCHEMA_VERSION, DeviceRef, Recommendation, Report
from tuner.report.text import shown, unsafe

# pg_settings.source (guc.c GucSource_Names, PostgreSQL docs "pg_settings"), plus tuner's own: 'server' for a
# tablespace that uses the server's value, 'tablespace' for one with an option of its own, 'kernel' for a
# device's readahead.
SOURCES = frozenset({"default", "environment variable", "configuration file", "command line", "global",
                     "database", "user", "database user", "client", "override", "interactive", "test", "session",
                     "server", "tablespace", "kernel"})
_SESSION_ID = re.compile(r"[0-9A-Za-z_-]{1,64}")
# A kernel block-device name as sysfs shows it ("!" stands for "/" in names such as cciss!c0d0).
_DEVICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:!+-]{0,63}")
_HINT = ("a report tuner wrote names only the settings of its catalogue, with their own types and ranges, and the "
         "devices it found; regenerate it with 'tuner recommend' or 'tuner show SESSION --format json' rather "
         "than editing it")


class ReportError(ConfigError):
    """A report says something tuner never writes (exit 2; HTTP 422 from the daemon's API)."""

    http_status = 422


def check(report: Report, *, where: str = "the report") -> Report:
    """``report`` itself when tuner could have written it; else :class:`ReportError` naming the first offending
    field of ``where`` (the file, the stored session) in one sentence, with a hint."""
    problem = next(_problems(report), None)
    if problem is not None:
        raise ReportError(f"{where} cannot be used: {problem}", hint=_HINT)
    return report


def _problems(report: Report) -> Iterator[str]:
    if report.schema_version != SCHEMA_VERSION:
        yield (f"schema_version {report.schema_version} is not the one this tuner reads ({SCHEMA_VERSION}); "
               "a newer tuner may have written it")
    if not _SESSION_ID.fullmatch(report.session.id):
        yield f"session.id {shown(report.session.id)} is not a session id"
    # (target.dsn may hold a line break where libpq allows whitespace, and tuner never writes it raw)
    for name, value in (("session.host", report.session.host), ("session.kernel", report.session.kernel),
                        ("session.policy", report.session.policy), ("session.cache", report.session.cache),
                        ("target.mode", report.target.mode), ("target.server_version", report.target.server_version),
                        ("target.system_identifier", report.target.system_identifier or "")):
        if any(unsafe(ch) for ch in value):
            yield f"{name} {shown(value)} has a line break or a control character"
    yield from _decision(report)
    yield from _io(report)
    seen: dict[tuple[str, str, str | None], int] = {}
    for i, rec in enumerate(report.recommendations):
        at = f"recommendations[{i}]"
        yield from _recommendation(rec, at, report.target.server_version_num)
        key = (rec.knob, rec.scope, rec.object)
        if key in seen:
            yield f"{at} repeats {rec.knob} for {_what(rec)} (recommendations[{seen[key]}] has it already)"
        seen.setdefault(key, i)


def _decision(report: Report) -> Iterator[str]:
    """The policy's decision values, when the report carries them (older reports do not), inside the ranges the
    policy itself accepts (:class:`tuner.settings.policy.DecisionPolicy`): the HTML report draws its minimum-effect line
    from them."""
    if report.min_effect is not None and not (math.isfinite(report.min_effect) and 1.0 <= report.min_effect <= 100):
        yield f"min_effect {report.min_effect!r} is not an improvement ratio between 1 and 100"
    if report.alpha is not None and not (math.isfinite(report.alpha) and 0 < report.alpha < 0.5):
        yield f"alpha {report.alpha!r} is not an error rate above 0 and below 0.5"


def _io(report: Report) -> Iterator[str]:
    """The device profile and the I/O regime, when the report carries them (older reports do not): a profile
    tuner can parse, device names the kernel could give, figures that are finite and not negative."""
    if report.device_profile is not None:
        try:
            parse_profile(report.device_profile)
        except ProfileError:
            yield f"device_profile {shown(report.device_profile)} is not a device profile tuner writes"
    for i, r in enumerate(report.io_regime):
        at = f"io_regime[{i}]"
        if r.device is not None and not all(_DEVICE_NAME.fullmatch(n) for n in r.device.split("+")):
            yield f"{at}.device {shown(r.device)} is not kernel device names joined by +"
        if r.family is not None and any(unsafe(ch) for ch in r.family):
            yield f"{at}.family {shown(r.family)} has a line break or a control character"
        numbers = [r.read_iops, r.read_mib_s, r.kib_per_read, r.reads_in_flight, r.read_latency_ms, r.busy_share,
                   r.peak_read_iops, r.cap_iops, r.cap_mib_s, float(r.probes)]
        if not all(x is None or (math.isfinite(x) and x >= 0) for x in numbers):
            yield f"{at} has a figure that is negative or not finite"


def _what(rec: Recommendation) -> str:
    return "the server" if rec.object is None else shown(rec.object)


def _recommendation(rec: Recommendation, at: str, version: int) -> Iterator[str]:
    cat = catalog.load()
    spec = cat.reported(rec.knob, version)
    if spec is None:
        if rec.knob in cat.never_touch:
            yield f"{at}.knob {shown(rec.knob)} is a durability setting, which tuner never changes"
        elif rec.knob in cat.reported_names():
            yield f"{at}.knob {rec.knob} does not exist on a server of version {version}"
        else:
            yield f"{at}.knob {shown(rec.knob)} is not a setting tuner tunes"
        return
    if rec.scope not in spec.scopes:
        yield f"{at}.scope {rec.scope} is not one of {rec.knob}'s ({', '.join(spec.scopes)})"
        return
    for field, value in (("current", rec.current), ("recommended", rec.recommended)):
        why = _value_problem(spec, value, today=field == "current")
        if why:
            yield f"{at}.{field} {shown(value)} {why}"
    if rec.source not in SOURCES:
        yield f"{at}.source {shown(rec.source)} is not a source PostgreSQL or the kernel reports"
    for other in rec.together_with:
        if other not in cat.reported_names():
            yield f"{at}.together_with names {shown(other)}, which is not a setting tuner tunes"
    if rec.effect is not None:
        numbers = [rec.effect.improvement, rec.effect.p_value, *rec.effect.ci95, *rec.effect.decision_ci,
                   *(x for q in rec.effect.queries for x in (q.baseline_ms, q.candidate_ms, q.time_share,
                                                             q.improvement, *q.ci95, *q.decision_ci))]
        if not all(math.isfinite(x) for x in numbers):
            yield f"{at}.effect has a number that is not finite"
    yield from _object(rec, at)


def _value_problem(spec: catalog.KnobSpec, value: int | str, *, today: bool) -> str | None:
    if spec.kind == "enum":
        if value not in (spec.values or ()):
            return f"is not a value of {spec.name} ({', '.join(spec.values or ())})"
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        return f"is not an integer, as {spec.name} is"
    # A device's readahead has no upper limit in the kernel (block/blk-sysfs.c, queue_ra_store): today's value
    # may lie above the catalogue's, which bounds what tuner recommends.
    high = None if today and spec.context == "device" else spec.max
    if (spec.min is not None and value < spec.min) or (high is not None and value > high):
        return f"is outside {spec.name}'s range {spec.min}..{spec.max}"
    return None


def _object(rec: Recommendation, at: str) -> Iterator[str]:
    if rec.scope == "system" and rec.object is not None:
        yield f"{at}.object {shown(rec.object)} is set for a server-wide setting"
    if rec.scope == "tablespace" and (not rec.object or any(unsafe(ch) for ch in rec.object)):
        yield f"{at}.object {shown(rec.object or '')} is not a tablespace name (empty, or a control character)"
    if rec.scope != "device":
        if rec.device is not None:
            yield f"{at}.device is set for a {rec.scope} setting (only a device's readahead has one)"
        return
    if rec.device is None:
        yield f"{at}.device is missing for a device setting"
        return
    yield from _device(rec.device, f"{at}.device")
    if rec.object != rec.device.node:
        yield f"{at}.object {shown(rec.object or '')} is not its device's node {shown(rec.device.node)}"


def _device(dev: DeviceRef, at: str) -> Iterator[str]:
    if not _DEVICE_NAME.fullmatch(dev.name):
        yield f"{at}.name {shown(dev.name)} is not a kernel device name"
        return
    if dev.node != f"/dev/{dev.name}":
        yield f"{at}.node {shown(dev.node)} is not /dev/{dev.name}"
    if dev.sysfs_path != f"/sys/block/{dev.name}/queue/read_ahead_kb":
        yield f"{at}.sysfs_path {shown(dev.sysfs_path)} is not /sys/block/{dev.name}/queue/read_ahead_kb"
    keys = frozenset(dev.match)
    if keys not in MATCH_SHAPES:
        bad = sorted(keys - frozenset().union(*MATCH_SHAPES))
        what = f"the key {shown(bad[0])}" if bad else f"the keys {', '.join(sorted(keys)) or '(none)'} together"
        yield (f"{at}.match has {what}, which tuner never writes (it matches a device by one of: "
               f"{'; '.join(' + '.join(sorted(s)) for s in MATCH_SHAPES)})")
        return
    for key, value in dev.match.items():
        if not value or any(unsafe(ch) for ch in value):
            yield f"{at}.match[{key}] {shown(value)} is empty or has a line break or a control character"
    kernel = dev.match.get("KERNEL")
    if kernel is not None and kernel != (LOOP_KERNEL if len(keys) > 1 else dev.name):
        yield (f"{at}.match[KERNEL] {shown(kernel)} is not the device's own name {dev.name}"
               + (f" (with a backing file: {LOOP_KERNEL})" if len(keys) > 1 else ""))
