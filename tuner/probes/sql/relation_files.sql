-- Files of a relation and its indexes, relative to the data directory (first segment; .1, .2 … follow).
SELECT pg_relation_filepath(r) AS path
FROM (SELECT $1::regclass AS r
      UNION ALL
      SELECT indexrelid::regclass FROM pg_index WHERE indrelid = $1::regclass) AS rels
WHERE pg_relation_filepath(r) IS NOT NULL
