-- pg_buffercache in this database, and which of its eviction functions it has: pg_buffercache_evict_relation
-- (PostgreSQL 18, extension 1.6) or pg_buffercache_evict (17, 1.5). Both are for superusers only. No row: the
-- extension is not installed here.
SELECT n.nspname AS schema,
       e.extversion AS version,
       EXISTS (SELECT 1 FROM pg_proc p WHERE p.pronamespace = e.extnamespace
                                         AND p.proname = 'pg_buffercache_evict_relation') AS evict_relation,
       EXISTS (SELECT 1 FROM pg_proc p WHERE p.pronamespace = e.extnamespace
                                         AND p.proname = 'pg_buffercache_evict') AS evict_buffer
FROM pg_extension e
JOIN pg_namespace n ON n.oid = e.extnamespace
WHERE e.extname = 'pg_buffercache'
