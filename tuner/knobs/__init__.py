"""Knobs: the catalogue of settings tuner knows (as data: ``catalog.toml``, read by :mod:`.catalog`) — each
setting's range, context and default per PostgreSQL version — and how a setting a major version removed reads in
the versions after it (:mod:`.successors`). What the host says about them is :mod:`tuner.hostfacts`."""
