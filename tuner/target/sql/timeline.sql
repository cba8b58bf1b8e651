-- The timeline of the last checkpoint (on a standby, restartpoint) in pg_control: one source on a primary and on a
-- hot standby, whether or not a WAL receiver runs; it lags a switch by at most one checkpoint. EXECUTE on
-- pg_control_checkpoint() is PUBLIC by default but may be revoked.
SELECT timeline_id FROM pg_control_checkpoint()
