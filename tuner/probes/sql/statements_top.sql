-- The statements of database $1 that read the most, with the read I/O of all of them ($2: how many to return).
-- A statement's read time is shared_blk_read_time from pg_stat_statements 1.11 (PostgreSQL 17), blk_read_time
-- before: read through to_jsonb, so one query serves every version of the extension. Both are 0 unless
-- track_io_timing was on. Rows of other users' statements that this role may not see have a NULL queryid and the
-- text '<insufficient privilege>' (pg_read_all_stats shows them); they count in the totals, as one group.
WITH by_query AS (
    SELECT s.queryid,
           min(s.query) AS query,
           sum(s.calls)::bigint AS calls,
           sum(s.shared_blks_read)::bigint AS blocks_read,
           sum(s.shared_blks_hit)::bigint AS blocks_hit,
           sum(coalesce(to_jsonb(s) ->> 'shared_blk_read_time', to_jsonb(s) ->> 'blk_read_time')::float8)
               AS read_time_ms
    FROM {schema}.pg_stat_statements s
    WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = $1)
    GROUP BY s.queryid
)
SELECT queryid, query, calls, blocks_read, blocks_hit, read_time_ms,
       sum(blocks_read) OVER () AS total_blocks_read,
       sum(read_time_ms) OVER () AS total_read_time_ms
FROM by_query
ORDER BY read_time_ms DESC, blocks_read DESC, calls DESC
LIMIT $2
