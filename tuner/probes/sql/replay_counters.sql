-- The standby's recovery counters at this moment: its startup process, replay and receive positions, and what the
-- recovery prefetcher did so far (15+).
SELECT (SELECT pid FROM pg_stat_activity WHERE backend_type = 'startup') AS startup_pid,
       pg_last_wal_replay_lsn()::text AS replay_lsn,
       pg_last_wal_receive_lsn()::text AS receive_lsn,
       p.prefetch, p.hit, p.skip_fpw
FROM pg_stat_recovery_prefetch AS p
