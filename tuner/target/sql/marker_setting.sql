-- Where the marker's value in force comes from (pg_settings.source: "configuration file", "client", "command line",
-- "user", "database", …) and, for superusers and pg_read_all_settings, the file and line that set it.
-- GUC names are case-insensitive: a placeholder keeps the case it was first written in.
SELECT setting, source, sourcefile, sourceline
FROM pg_settings
WHERE lower(name) = 'tuner.role'
