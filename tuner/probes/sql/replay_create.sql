-- The replay family's scratch objects (in tuner's scratch schema, dropped with it). The heap's fillfactor leaves
-- room on every page, so the stream's updates are HOT: each is one WAL record on the updated row's own page, and no
-- index is touched. No autovacuum on either table: it would write WAL of its own into the measured stream.
CREATE TABLE tuner_scratch.replay_heap (id int NOT NULL, n int NOT NULL, pad text)
    WITH (fillfactor = 50, autovacuum_enabled = false);
-- One row per page (fillfactor 10, ~530-byte rows): an index scan of it reads each of its pages once, into
-- shared buffers (no ring buffer, unlike a large sequential scan).
CREATE TABLE tuner_scratch.replay_filler (id int NOT NULL, pad text)
    WITH (fillfactor = 10, autovacuum_enabled = false);
-- The stream: one UPDATE per id, in the array's order (one statement for the whole array would update them in
-- index order, i.e. ascending pages, which kernel readahead serves without any prefetching).
CREATE FUNCTION tuner_scratch.replay_touch(ids int[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    i int;
BEGIN
    FOREACH i IN ARRAY ids LOOP
        UPDATE tuner_scratch.replay_heap SET n = n + 1 WHERE id = i;
    END LOOP;
END
$$;
