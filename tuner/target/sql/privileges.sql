-- What the connected role may do, for `tuner check`'s list of missing privileges (PostgreSQL 15+:
-- has_parameter_privilege and GRANT SET ON PARAMETER came in 15). Read-only; superusers pass every test.
SELECT quote_ident(current_user) AS role,
       pg_has_role(current_user, 'pg_read_all_settings', 'member') AS read_all_settings,
       pg_has_role(current_user, 'pg_read_all_stats', 'member') AS read_all_stats,
       has_function_privilege('pg_control_system()', 'EXECUTE') AS control_system,
       pg_has_role(current_user, 'pg_read_all_data', 'member')
         OR NOT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                        WHERE c.relkind IN ('r', 'm') AND n.nspname <> 'information_schema'
                          AND n.nspname NOT LIKE 'pg\_%' AND NOT has_table_privilege(c.oid, 'SELECT'))
         AS read_tables,
       has_parameter_privilege('track_io_timing', 'SET') AS set_track_io_timing,
       has_table_privilege('pg_file_settings', 'SELECT') AS file_settings,
       has_function_privilege('pg_show_all_file_settings()', 'EXECUTE') AS show_file_settings,
       has_function_privilege('pg_stat_file(text, boolean)', 'EXECUTE') AS stat_file,
       has_function_privilege('pg_read_file(text, bigint, bigint, boolean)', 'EXECUTE') AS read_file,
       pg_has_role(current_user, 'pg_read_server_files', 'member') AS read_server_files
