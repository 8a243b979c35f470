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
-- Writes go out in variadic calls (one per key and kind, in chunks), not
-- one call per job: a call from Lua costs about as much as the work of one
-- member.
local CHUNK = 2000
local function flush(cmd, key, args)
  for from = 1, #args, CHUNK do
    redis.call(cmd, key, unpack(args, from, math.min(from + CHUNK - 1, #args)))
  end
end
-- The current due scores of every job in the call, in one read.
local jobs = {}
local i = 2 + nodes
while i <= #ARGV do
  jobs[#jobs + 1] = ARGV[i]
  i = i + 8 + tonumber(ARGV[i + 7])
end
local scores = {}
for from = 1, #jobs, CHUNK do
  local part = redis.call('ZMSCORE', KEYS[2], unpack(jobs, from, math.min(from + CHUNK - 1, #jobs)))
  for k = 1, #part do scores[from + k - 1] = part[k] end
end
local advance, leave, rings = {}, {}, {}
local claimed, skipped = 0, 0
local j = 0
i = 2 + nodes
while i <= #ARGV do
  j = j + 1
  local job, expected, nxt = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local ring = tonumber(ARGV[i + 3])
  local missed, record, awaited = ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
  local n = tonumber(ARGV[i + 7])
  local score = scores[j]
  if score and tonumber(score) == tonumber(expected) then
    if nxt == '' then
      leave[#leave + 1] = job
    else
      advance[#advance + 1] = nxt
      advance[#advance + 1] = job
    end
    local members = rings[ring]
    if not members then
      members = {}
      rings[ring] = members
    end
    for k = 1, n do
      local tail = ARGV[i + 7 + k]
      members[#members + 1] = string.match(tail, '^%d+')
      members[#members + 1] = job .. ':' .. tail
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
flush('ZADD', KEYS[2], advance)
flush('ZREM', KEYS[2], leave)
for ring, members in pairs(rings) do
  flush('ZADD', KEYS[ring], members)
end
return {claimed, skipped}
