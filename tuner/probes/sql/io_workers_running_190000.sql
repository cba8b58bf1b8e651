-- 19+: the I/O worker processes running now (the pool sizes itself between io_min_workers and io_max_workers;
-- workers above the minimum exit only after io_worker_idle_timeout, so right after a scan this is the pool it grew to).
SELECT count(*)::float8 FROM pg_stat_activity WHERE backend_type = 'io worker'
