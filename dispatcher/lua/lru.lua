-- LEAST_RECENTLY_USED for one job, atomically for the whole cluster.
--
-- KEYS[1]  the job's LRU sorted set: executor id scored by its last use
--          (ms, Redis server clock)
-- ARGV[1]  idle TTL (ms): the set of a job unused this long is dropped
-- ARGV[2], ARGV[3], ...  the live executor ids, sorted
--
-- Forgets executors that are no longer live, picks the one used longest ago
-- (an executor never used counts as used at 0, and on a tie the first in
-- sorted order wins), marks it used now and returns its id. "Now" is the
-- Redis server's clock, never a scheduler node's, and is forced past the
-- newest score so two picks in one millisecond still order strictly.

local key = KEYS[1]
local idle_ttl_ms = tonumber(ARGV[1])

local live = {}
for i = 2, #ARGV do
  live[ARGV[i]] = true
end
for _, id in ipairs(redis.call('ZRANGE', key, 0, -1)) do
  if not live[id] then
    redis.call('ZREM', key, id)
  end
end

local best, best_used
for i = 2, #ARGV do
  local id = ARGV[i]
  local used = tonumber(redis.call('ZSCORE', key, id)) or 0
  if best == nil or used < best_used then
    best, best_used = id, used
  end
end

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
if newest[2] ~= nil and tonumber(newest[2]) >= now_ms then
  now_ms = tonumber(newest[2]) + 1
end
redis.call('ZADD', key, now_ms, best)
redis.call('PEXPIRE', key, idle_ttl_ms)
return best
