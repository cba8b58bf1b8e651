-- A column's statistics as text, to fill a normalised statement's parameter compared to it: $1 the table (a name
-- to_regclass resolves), $2 the column. No row: no such column; NULL statistics: not analysed (ANALYZE on the
-- primary). The whole-table row first where a parent has both.
SELECT s.histogram_bounds::text::text[] AS bounds,
       s.most_common_vals::text::text[] AS common,
       format_type(a.atttypid, a.atttypmod) AS type
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname AND s.attname = a.attname
WHERE a.attrelid = to_regclass($1) AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY s.inherited DESC NULLS LAST
LIMIT 1
