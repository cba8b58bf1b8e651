-- Rows $1..$2 of the replay heap, in id order: a single writer fills its pages one after the other, so the first
-- row of page p is id p * rows_per_page + 1.
INSERT INTO tuner_scratch.replay_heap (id, n, pad)
SELECT g, 0, repeat('r', 100) FROM generate_series($1::int, $2::int) AS g
