-- PostgreSQL 17: evict the relations' shared buffers ($1: oids; NULL: every buffer) one by one. The function
-- returns a boolean in extension 1.5 (17) and a record in 1.6 (18): only the number of calls is counted, and
-- whether the blocks really left is for the probe's own counters to say.
SELECT count({schema}.pg_buffercache_evict(b.bufferid))::bigint AS evicted, 0::bigint AS skipped
FROM {schema}.pg_buffercache AS b
WHERE b.relfilenode IS NOT NULL
  AND ($1::oid[] IS NULL
       OR (b.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND b.relfilenode IN (SELECT pg_relation_filenode(o) FROM unnest($1::oid[]) AS o)))
