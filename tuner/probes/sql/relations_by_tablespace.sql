-- Tables and materialised views of at least $1 pages with the tablespace they live in (0 in pg_class means
-- the database's default tablespace), largest first: the readahead family scans the largest one per device.
SELECT c.oid::regclass::text AS relation,
       c.relpages::bigint    AS relpages,
       t.spcname             AS tablespace
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_database d ON d.datname = current_database()
JOIN pg_tablespace t ON t.oid = CASE WHEN c.reltablespace = 0 THEN d.dattablespace ELSE c.reltablespace END
WHERE c.relkind IN ('r', 'm')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname !~ '^pg_toast'
  AND c.relpages >= $1
ORDER BY c.relpages DESC
