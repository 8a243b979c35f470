-- LEAST_FREQUENTLY_USED for one job, atomically for the whole cluster.
--
-- KEYS[1]  the job's LFU hash: executor id -> uses in the current window
-- ARGV[1]  window length (ms): the hash is dropped this long after it was
--          created, so counts restart (XXL-JOB clears its map every 24 h)
-- ARGV[2]  a count above this is reseeded (XXL-JOB: 1,000,000)
-- ARGV[3], ARGV[4], ...  pairs of (live executor id, seed): the id in sorted
--          order, and the random small count a new executor starts with
--
-- Forgets executors that are no longer live, seeds new ones, picks the
-- least used (first in sorted order on a tie), counts the use, returns its id.

local key = KEYS[1]
local window_ms = tonumber(ARGV[1])
local reseed_above = tonumber(ARGV[2])

local live = {}
for i = 3, #ARGV, 2 do
  live[ARGV[i]] = true
end
for _, id in ipairs(redis.call('HKEYS', key)) do
  if not live[id] then
    redis.call('HDEL', key, id)
  end
end

local best, best_count
for i = 3, #ARGV, 2 do
  local id, seed = ARGV[i], tonumber(ARGV[i + 1])
  local count = tonumber(redis.call('HGET', key, id))
  if count == nil or count > reseed_above then
    count = seed
    redis.call('HSET', key, id, count)
  end
  if best == nil or count < best_count then
    best, best_count = id, count
  end
end

redis.call('HINCRBY', key, best, 1)
if redis.call('PTTL', key) < 0 then
  redis.call('PEXPIRE', key, window_ms)
end
return best
