-- Identity and role of the server. Role settings are those of the login role (session_user, whose ALTER ROLE
-- settings apply at login) and of the role in effect (current_user, after a SET ROLE at login), in any case. data_directory is read through pg_settings, which hides it (no error)
-- from roles that may not see it.
SELECT current_setting('server_version_num')::int AS server_version_num,
       current_setting('server_version') AS server_version,
       pg_is_in_recovery() AS in_recovery,
       current_database() AS database,
       current_user AS "user",
       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS is_superuser,
       pg_has_role(current_user, 'pg_read_all_settings', 'member') AS can_read_all_settings,
       (SELECT setting FROM pg_settings WHERE name = 'data_directory') AS data_directory,
       current_setting('tuner.role', true) AS staging_marker,
       inet_server_addr()::text AS server_addr,
       (SELECT count(*) FROM pg_stat_replication)::int AS replicas,
       EXISTS (SELECT 1 FROM pg_db_role_setting, unnest(setconfig) AS c
               WHERE lower(c) LIKE 'tuner.role=%'
                 AND setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
                 AND (setrole = 0 OR setrole IN (SELECT oid FROM pg_roles
                                                 WHERE rolname IN (current_user, session_user))))
         AS marker_in_role_settings
