-- The statements that read the most from disk into shared buffers (pg_stat_statements.shared_blks_read, counted
-- since its last reset), one row per queryid summed over users and databases, with the total over every statement:
-- the drift check's view of the workload (issue #56). Up to PostgreSQL 13: no toplevel column. A role without
-- pg_read_all_stats sees NULL queryids for other roles' statements; those are left out. The extension's schema is
-- on the transaction's search_path (set_config by the caller).
WITH s AS (
    SELECT queryid, sum(shared_blks_read)::bigint AS blks
    FROM pg_stat_statements
    WHERE queryid IS NOT NULL
    GROUP BY queryid
)
SELECT queryid, blks, (SELECT sum(blks) FROM s)::bigint AS total
FROM s
WHERE blks > 0
ORDER BY blks DESC, queryid
LIMIT $1
