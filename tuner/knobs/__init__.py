"""Knobs: the catalogue of settings tuner knows (as data) and the search spaces built from it — and the one place
that reads what the host under a local PostgreSQL says about them: its block devices (:mod:`~tuner.knobs.devices`,
sysfs), the cgroup limits and memory (:mod:`~tuner.knobs.hostfacts`) and what would stop io_uring
(:mod:`~tuner.knobs.iouring`). Files only (and one io_uring_setup of tuner's own); nothing on the host is written."""
