SELECT spcname AS name,
       pg_tablespace_location(oid) AS location,
       coalesce(spcoptions, '{}') AS options
FROM pg_tablespace
ORDER BY spcname
