-- As top_statements.sql, from PostgreSQL 14 (pg_stat_statements 1.9): top-level statements only, so that a
-- statement run inside a function (pg_stat_statements.track = all) is not counted twice.
WITH s AS (
    SELECT queryid, sum(shared_blks_read)::bigint AS blks
    FROM pg_stat_statements
    WHERE queryid IS NOT NULL AND toplevel
    GROUP BY queryid
)
SELECT queryid, blks, (SELECT sum(blks) FROM s)::bigint AS total
FROM s
WHERE blks > 0
ORDER BY blks DESC, queryid
LIMIT $1
