-- Where the staging marker comes from: a configuration file the operator wrote, not a client's options.
-- pg_file_settings is readable by superusers (and roles granted it).
SELECT sourcefile, sourceline, setting, applied
FROM pg_file_settings
WHERE name = 'tuner.role'
ORDER BY seqno DESC
LIMIT 1
