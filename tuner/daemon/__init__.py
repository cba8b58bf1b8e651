"""``tuner daemon``: tuner as a background service.

It runs full sessions on a schedule and inside maintenance windows, watches each target for drift (a new
PostgreSQL major, a new device, a hand-edited setting, growth) and answers it with the session or re-validation
it calls for, re-validates stored recommendations, and serves what it knows over HTTP for config management. It
never applies a recommendation itself.

Modules (durations, windows and crontab are below config, in ``tuner.settings.durations`` and ``tuner.settings.schedule``):
``systemd`` (sd_notify), ``daemon_lock`` (one daemon per state
directory), ``drift`` (the drift fingerprint and what a change calls for; :mod:`tuner.hostfacts` its device and cgroup reads), ``api`` (HTTP), ``metrics``
(Prometheus), ``service`` (lifecycle, signals, schedule, reload), ``worker`` (the queue, its store handle and the
runs), ``queries`` (what the API asks), ``watch`` (drift orchestration), ``pins`` (which family owns a
recommendation and honours pins), ``state`` (what those parts share).
"""
