-- Arms a FIX_DELAY job's next fire after the final ending of the fire it
-- awaits (the result monitor; not fenced: any node's monitor).
--
-- KEYS[1]  the partition's due set
-- KEYS[2]  the partition's delays hash: job id -> the fire the job awaits,
--          set by the claim that put that fire on a ring
-- ARGV[1]  job id, ARGV[2] the ended fire's instant (ms), ARGV[3] the next
--          fire (ms)
--
-- Only the awaited fire arms, once: a redelivered result, another shard of
-- a broadcast, or a fire from before a stop/start or a schedule change (the
-- claim of the new first fire replaced it) does nothing. A job already in
-- the due set (re-armed by a save or a start) keeps its score (NX).
-- Returns 1 when it armed the job.
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
return redis.call('ZADD', KEYS[1], 'NX', ARGV[3], ARGV[1])
