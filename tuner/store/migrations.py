"""The store's schema, as forward migrations that run on SQLite and on PostgreSQL alike.

Each migration takes the store from version ``n - 1`` to ``n``. A store is never changed in place except by a
migration, and a store whose version is newer than :data:`VERSION` is refused (an older tuner must not write into
a schema it does not know). The SQL is the common subset of both: TEXT, BIGINT, INTEGER and DOUBLE PRECISION
columns, JSON kept as TEXT, timestamps as ISO 8601 UTC text (they sort as text), booleans as 0/1.
"""

from __future__ import annotations

META = "tuner_meta"

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: sessions, targets, trials, recommendations (with their decisions), drift events.
    (
        f"CREATE TABLE {META} (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE targets (
            id TEXT PRIMARY KEY,
            system_identifier TEXT,
            data_directory TEXT,
            label TEXT NOT NULL,
            first_seen TEXT NOT NULL,
            last_seen TEXT NOT NULL)""",
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            target_id TEXT NOT NULL REFERENCES targets (id),
            started_at TEXT NOT NULL,
            duration_s DOUBLE PRECISION NOT NULL,
            kind TEXT NOT NULL,
            sandbox INTEGER NOT NULL,
            major INTEGER NOT NULL,
            server_version TEXT NOT NULL,
            device_key TEXT,
            policy TEXT NOT NULL,
            seed BIGINT NOT NULL,
            probes INTEGER NOT NULL,
            tuner_version TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            report TEXT NOT NULL)""",
        "CREATE INDEX sessions_by_target ON sessions (target_id, started_at)",
        "CREATE INDEX sessions_by_device ON sessions (major, device_key, started_at)",
        """CREATE TABLE trials (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            family TEXT,
            object TEXT,
            config TEXT NOT NULL,
            value DOUBLE PRECISION,
            status TEXT NOT NULL,
            phase TEXT NOT NULL,
            arm TEXT,
            started_at TEXT NOT NULL,
            PRIMARY KEY (session_id, seq))""",
        """CREATE TABLE recommendations (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            knob TEXT NOT NULL,
            scope TEXT NOT NULL,
            object TEXT,
            current_value TEXT NOT NULL,
            recommended TEXT NOT NULL,
            decision TEXT NOT NULL,
            improvement DOUBLE PRECISION,
            ci_low DOUBLE PRECISION,
            ci_high DOUBLE PRECISION,
            n_pairs INTEGER,
            near_low BIGINT,
            near_high BIGINT,
            reason TEXT NOT NULL,
            PRIMARY KEY (session_id, seq))""",
        """CREATE TABLE drift_events (
            id TEXT PRIMARY KEY,
            target_id TEXT NOT NULL REFERENCES targets (id),
            detected_at TEXT NOT NULL,
            changes TEXT NOT NULL,
            action TEXT NOT NULL)""",
        "CREATE INDEX drift_by_target ON drift_events (target_id, detected_at)",
    ),
    # 2: the daemon's work: every session or re-validation it was asked for (by its schedule, a drift event, its
    # re-validation timer or POST /v1/sessions), queued until its window, then running, then how it ended. A
    # daemon killed mid-session finds its row 'running' when it starts again and records it 'interrupted'. Rows
    # carry their daemon (owner: its host and state directory): daemons that share a store see only their own work.
    (
        """CREATE TABLE daemon_runs (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            target TEXT NOT NULL,
            target_id TEXT,
            kind TEXT NOT NULL,
            families TEXT NOT NULL,
            knobs TEXT NOT NULL,
            reason TEXT NOT NULL,
            forced INTEGER NOT NULL,
            attempt INTEGER NOT NULL,
            requested_at TEXT NOT NULL,
            started_at TEXT,
            ended_at TEXT,
            status TEXT NOT NULL,
            detail TEXT)""",
        "CREATE INDEX daemon_runs_by_status ON daemon_runs (owner, status, requested_at)",
    ),
)

VERSION = len(MIGRATIONS)
