-- Needs EXECUTE on pg_control_system() (superuser by default); a failure is not fatal.
SELECT system_identifier::text AS system_identifier FROM pg_control_system()
