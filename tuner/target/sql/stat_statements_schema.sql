-- The schema pg_stat_statements is installed in (CREATE EXTENSION pg_stat_statements, on the primary; a standby
-- has it by replication), or no row.
SELECT extnamespace::regnamespace::text AS schema FROM pg_extension WHERE extname = 'pg_stat_statements'
