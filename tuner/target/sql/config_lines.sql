-- Each setting a reload applies that this session has from a configuration file or its default, beside the last
-- line on disk that sets it (pg_file_settings re-reads the files now; pg_settings is what this server process
-- loaded, with the file and line — NULL unless the role is a superuser or has pg_read_all_settings). What a client,
-- a role or a database set hides the file's value, and a restart-only setting waits for a restart: neither is
-- compared. Superusers (and roles granted pg_file_settings) only.
WITH on_disk AS (
    SELECT DISTINCT ON (lower(name)) lower(name) AS name, setting, sourcefile, sourceline
    FROM pg_file_settings
    WHERE error IS NULL AND applied
    ORDER BY lower(name), seqno DESC
)
SELECT s.name, s.source, s.vartype, s.unit, s.setting AS loaded, s.sourcefile AS loaded_file,
       s.sourceline AS loaded_line, d.setting AS on_disk, d.sourcefile AS on_disk_file, d.sourceline AS on_disk_line
FROM pg_settings s
LEFT JOIN on_disk d ON d.name = lower(s.name)
WHERE s.context NOT IN ('postmaster', 'internal')
  AND s.source IN ('default', 'configuration file')
  AND (d.name IS NOT NULL OR s.source = 'configuration file')
ORDER BY s.name
