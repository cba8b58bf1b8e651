-- $1 pages of filler, one row each.
INSERT INTO tuner_scratch.replay_filler (id, pad)
SELECT g, repeat('f', 520) FROM generate_series(1, $1::int) AS g
