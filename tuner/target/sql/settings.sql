SELECT name, setting, unit, context, vartype, min_val, max_val, boot_val, reset_val, source, pending_restart,
       sourcefile, sourceline
FROM pg_settings
WHERE name = ANY($1::text[])
