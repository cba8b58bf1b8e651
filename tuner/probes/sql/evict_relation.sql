-- PostgreSQL 18: evict every unpinned shared buffer of each relation ($1: oids), dirty ones written first.
SELECT coalesce(sum(e.buffers_evicted), 0)::bigint AS evicted,
       coalesce(sum(e.buffers_skipped), 0)::bigint AS skipped
FROM unnest($1::oid[]) AS r(oid),
     LATERAL {schema}.pg_buffercache_evict_relation(r.oid::regclass) AS e
