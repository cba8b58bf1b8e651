-- The last line on disk that sets the staging marker (pg_file_settings re-reads the files, so a line added or
-- changed but not reloaded shows here and not in pg_settings). Superusers (and roles granted it) only.
SELECT sourcefile, sourceline, setting, applied
FROM pg_file_settings
WHERE lower(name) = 'tuner.role'
ORDER BY seqno DESC
LIMIT 1
