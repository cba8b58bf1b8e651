-- The asynchronous-I/O settings the concurrency family reads beside the facts: each one's value, context and (for
-- io_method) the values this build offers. Absent names are settings this server does not have.
SELECT name, setting, context, enumvals
FROM pg_settings
WHERE name = ANY($1::text[])
