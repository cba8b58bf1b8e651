-- What the drift check reads besides the target's facts: when the postmaster started, how much data there is
-- (every database the role may size: CONNECT, or pg_read_all_stats for all) and the memory settings the size band
-- is measured against. Readable by any role, on a primary or a hot standby.
SELECT pg_postmaster_start_time() AS postmaster_start,
       (SELECT sum(pg_database_size(oid)) FROM pg_database
        WHERE has_database_privilege(oid, 'CONNECT')
           OR pg_has_role(current_user, 'pg_read_all_stats', 'member'))::bigint AS database_bytes,
       pg_size_bytes(current_setting('shared_buffers')) AS shared_buffers_bytes,
       pg_size_bytes(current_setting('effective_cache_size')) AS effective_cache_size_bytes
