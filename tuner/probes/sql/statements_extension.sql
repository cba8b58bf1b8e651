-- pg_stat_statements in this database: the schema its view lives in and its version. No row: not installed here
-- (CREATE EXTENSION on the primary installs it for its standbys too; the library must also be in
-- shared_preload_libraries of the server that is read).
SELECT n.nspname AS schema, e.extversion AS version
FROM pg_extension e
JOIN pg_namespace n ON n.oid = e.extnamespace
WHERE e.extname = 'pg_stat_statements'
