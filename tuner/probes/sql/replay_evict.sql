-- Read every filler page into the standby's shared buffers (the caller forbids every other plan than this index
-- scan): the clock sweep pushes out the pages the pre-touch left there.
SELECT count(pad) FROM tuner_scratch.replay_filler WHERE id > 0
