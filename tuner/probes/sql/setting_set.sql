-- A setting for this session, by name and value as parameters: nothing is spliced into the SQL.
SELECT set_config($1, $2, false)
