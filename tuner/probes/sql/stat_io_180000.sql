-- 18+: the same, with read_bytes (new in 18, when op_bytes went away): each read counts once, whatever its size, so
-- bytes per read shows what read combining made of the scans' blocks.
SELECT coalesce(sum(reads), 0)::float8 AS reads, coalesce(sum(hits), 0)::float8 AS hits,
       coalesce(sum(read_bytes), 0)::float8 AS read_bytes
FROM pg_stat_io
WHERE backend_type = 'client backend' AND object = 'relation'
