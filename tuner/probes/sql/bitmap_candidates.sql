-- Relations worth probing with bitmap heap scans: the largest tables, each with a btree index whose
-- leading column is numeric, and that column's planner statistics (correlation with the physical order,
-- histogram). Ordered by size, then by how uncorrelated the column is (sparser scans first).
SELECT c.oid::regclass::text                       AS relation,
       c.relpages::bigint                          AS relpages,
       c.reltuples::float8                         AS reltuples,
       i.indexrelid::regclass::text                AS index,
       quote_ident(a.attname)                      AS column_sql,
       a.atttypid::regtype::text                   AS column_type,
       s.correlation::float8                       AS correlation,
       s.histogram_bounds::text                    AS histogram_bounds,
       coalesce(s.null_frac, 0)::float8            AS null_frac,
       coalesce((SELECT sum(f) FROM unnest(s.most_common_freqs) AS f), 0)::float8 AS mcv_frac
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_index i ON i.indrelid = c.oid AND i.indisvalid AND i.indisready AND i.indpred IS NULL
JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_am am ON am.oid = ic.relam AND am.amname = 'btree'
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0]
LEFT JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname AND s.attname = a.attname
                     AND NOT s.inherited
WHERE c.relkind IN ('r', 'm')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname !~ '^pg_toast'
  AND a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype, 'numeric'::regtype,
                     'float4'::regtype, 'float8'::regtype)
  AND c.relpages >= $1
ORDER BY c.relpages DESC, abs(coalesce(s.correlation, 1)) ASC
