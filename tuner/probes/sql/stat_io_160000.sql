-- 16-17: this server's client backends' reads and hits of relations, from pg_stat_io (new in 16). "reads" counts
-- blocks here (op_bytes is the block size), so it cannot show read combining.
SELECT coalesce(sum(reads), 0)::float8 AS reads, coalesce(sum(hits), 0)::float8 AS hits, NULL::float8 AS read_bytes
FROM pg_stat_io
WHERE backend_type = 'client backend' AND object = 'relation'
