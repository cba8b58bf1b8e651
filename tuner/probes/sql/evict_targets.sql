-- What a probe of relation $1 may read through shared buffers: the relation, its indexes (bitmap scans read
-- them too), its TOAST table and that table's index. Only relations with storage in shared buffers.
WITH rel AS (SELECT $1::regclass::oid AS oid),
     toast AS (SELECT reltoastrelid AS oid FROM pg_class WHERE oid = (SELECT oid FROM rel) AND reltoastrelid <> 0),
     rels AS (SELECT oid FROM rel
              UNION SELECT indexrelid FROM pg_index WHERE indrelid = (SELECT oid FROM rel)
              UNION SELECT oid FROM toast
              UNION SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT oid FROM toast))
SELECT c.oid
FROM rels JOIN pg_class c ON c.oid = rels.oid
WHERE c.relkind IN ('r', 'i', 't', 'm') AND c.relpersistence <> 't'
ORDER BY c.oid
