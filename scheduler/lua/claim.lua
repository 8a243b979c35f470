-- Claim due jobs of one partition for one leader term (fenced).
--
-- KEYS[1]   the partition's term key
-- KEYS[2]   the partition's due set
-- KEYS[3]   the partition's ring owners set
-- KEYS[4]   the partition's misfires hash (see missed.lua)
-- KEYS[5]   the partition's delays hash (see rearm.lua)
-- KEYS[6..] ring keys of the live nodes (same partition, same hash tag)
-- ARGV[1]   the caller's term
-- ARGV[2..] the live nodes' ids, in the order of their ring keys
-- then, per job: job id, expected due score, next score ('' = leave the
-- due set), ring key index into KEYS, skipped fires, missed record ('' =
-- none), the fire a FIX_DELAY job now awaits ('' = none), fire count n,
-- then n ring member tails: '<fire ms>' or
-- '<fire ms>:m' (a misfire fired now, trigger type MISFIRE).
--
-- A job whose due score is no longer the expected one (updated, stopped or
-- claimed meanwhile) is skipped, so a retried call never claims (or counts
-- a missed fire) twice. Returns {claimed, skipped}.
local refused = refuse_stale_term()
if refused then return refused end
local nodes = #KEYS - 5
for k = 1, nodes do
  redis.call('SADD', KEYS[3], ARGV[1 + k])
end
local claimed, skipped = 0, 0
local i = 2 + nodes
while i <= #ARGV do
  local job, expected, nxt = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local ring = KEYS[tonumber(ARGV[i + 3])]
  local missed, record, awaited = ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
  local n = tonumber(ARGV[i + 7])
  local score = redis.call('ZSCORE', KEYS[2], job)
  if score and tonumber(score) == tonumber(expected) then
    if nxt == '' then
      redis.call('ZREM', KEYS[2], job)
    else
      redis.call('ZADD', KEYS[2], nxt, job)
    end
    for k = 1, n do
      local tail = ARGV[i + 7 + k]
      redis.call('ZADD', ring, string.match(tail, '^%d+'), job .. ':' .. tail)
    end
    if record ~= '' then
      record_missed(KEYS[4], job, missed, record)
    end
    if awaited ~= '' then
      redis.call('HSET', KEYS[5], job, awaited)
    end
    claimed = claimed + 1
  else
    skipped = skipped + 1
  end
  i = i + 8 + n
end
return {claimed, skipped}
