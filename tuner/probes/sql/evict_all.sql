-- PostgreSQL 18: evict every unpinned shared buffer (the probed relations are not known: custom queries).
SELECT buffers_evicted::bigint AS evicted, buffers_skipped::bigint AS skipped
FROM {schema}.pg_buffercache_evict_all()
