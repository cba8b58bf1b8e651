-- The server's command line as the postmaster recorded it (postmaster.opts in the data directory): a -c tuner.role
-- there outranks every configuration file line. Superusers (and pg_read_server_files) only.
SELECT pg_read_file('postmaster.opts', 0, 65536, true)
