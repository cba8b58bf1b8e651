-- The last line on disk that sets the staging marker (pg_file_settings re-reads the files, so a line added or
-- changed but not reloaded shows here), and whether its file changed after the configuration was last loaded
-- (pg_conf_load_time()), and the data directory, where ALTER SYSTEM writes postgresql.auto.conf (NULL unless the
-- role may read it: pg_settings leaves the row out). Superusers (and roles granted pg_file_settings and
-- pg_read_server_files) only.
SELECT sourcefile, sourceline, setting, applied,
       (pg_stat_file(sourcefile, true)).modification > pg_conf_load_time() AS changed_since_load,
       (SELECT s.setting FROM pg_settings s WHERE s.name = 'data_directory') AS data_directory
FROM pg_file_settings
WHERE lower(name) = 'tuner.role'
ORDER BY seqno DESC
LIMIT 1
