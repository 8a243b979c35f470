-- Arms a FIX_DELAY job's next fire after the final ending of one of its
-- scheduled fires (the result monitor; not fenced: any node's monitor).
--
-- KEYS[1]  the partition's due set
-- KEYS[2]  the partition's delays hash: job id -> the fire instant that
--          last armed it
-- ARGV[1]  job id, ARGV[2] the ended fire's instant (ms), ARGV[3] the next
--          fire (ms)
--
-- A fire at or before the one recorded already armed the job (a
-- redelivered result, another shard of a broadcast, a retry's ending after
-- the first try's): nothing. A job already in the due set (re-armed by a
-- save or a start) keeps its score (NX). Returns 1 when it armed the job.
local last = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '-1')
if tonumber(ARGV[2]) <= last then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return redis.call('ZADD', KEYS[1], 'NX', ARGV[3], ARGV[1])
