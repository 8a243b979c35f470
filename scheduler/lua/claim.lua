-- Claim due jobs of one partition for one leader term (fenced), all or
-- nothing.
--
-- KEYS[1]   the partition's term key
-- KEYS[2]   the partition's due set
-- KEYS[3]   the partition's ring owners set
-- KEYS[4]   the partition's misfires hash (see missed.lua)
-- KEYS[5]   the partition's delays hash (see rearm.lua)
-- KEYS[6..] ring keys of the live nodes (same partition, same hash tag)
-- ARGV[1]   the caller's term
-- ARGV[2..] the live nodes' ids, in the order of their ring keys
-- then sections, each its number of arguments and then the arguments:
--   the J job ids;
--   their J expected due scores, in the same order;
--   advance: pairs (next score, job id) of the jobs that stay due;
--   leave: the ids of the jobs that leave the due set;
--   one per ring key, in the order of KEYS: pairs (fire ms, member), the
--   member '<job>:<fire ms>' or '<job>:<fire ms>:m' (a misfire fired now,
--   trigger type MISFIRE);
--   missed: triples (job id, skipped fires, record JSON);
--   awaited: pairs (job id, the fire a FIX_DELAY job now awaits).
--
-- The caller builds every write; the script checks that each job's due
-- score is still the expected one (none updated, stopped or claimed
-- meanwhile) and then applies them all with a few variadic calls, so its
-- work per job is one comparison. If any job's score moved, nothing is
-- written and the script returns {-1, i, ...}, the positions (1-based) of
-- those jobs: the caller leaves them out and claims the others again, so a
-- retried call never claims (or counts a missed fire) twice. Otherwise it
-- returns {J}.
local refused = refuse_stale_term()
if refused then return refused end
local nodes = #KEYS - 5
-- Writes go out in variadic calls of at most CHUNK arguments (an even
-- number: pairs are never split).
local CHUNK = 2000
local function flush(cmd, key, from, count)
  local last = from + count - 1
  for a = from, last, CHUNK do
    redis.call(cmd, key, unpack(ARGV, a, math.min(a + CHUNK - 1, last)))
  end
end
local at = 2 + nodes
local jobs = tonumber(ARGV[at])
local first_job = at + 1
at = first_job + jobs
local first_expected = at + 1
at = first_expected + jobs
-- The current due scores, in one read per chunk, checked in order.
local moved = {-1}
for from = 0, jobs - 1, CHUNK do
  local count = math.min(CHUNK, jobs - from)
  local scores = redis.call('ZMSCORE', KEYS[2],
    unpack(ARGV, first_job + from, first_job + from + count - 1))
  for k = 1, count do
    local score = scores[k]
    if not score or tonumber(score) ~= tonumber(ARGV[first_expected + from + k - 1]) then
      moved[#moved + 1] = from + k
    end
  end
end
if #moved > 1 then return moved end
for k = 1, nodes do
  redis.call('SADD', KEYS[3], ARGV[1 + k])
end
local count = tonumber(ARGV[at])
flush('ZADD', KEYS[2], at + 1, count)
at = at + 1 + count
count = tonumber(ARGV[at])
flush('ZREM', KEYS[2], at + 1, count)
at = at + 1 + count
for ring = 1, nodes do
  count = tonumber(ARGV[at])
  flush('ZADD', KEYS[5 + ring], at + 1, count)
  at = at + 1 + count
end
count = tonumber(ARGV[at])
for k = at + 1, at + count, 3 do
  record_missed(KEYS[4], ARGV[k], ARGV[k + 1], ARGV[k + 2])
end
at = at + 1 + count
count = tonumber(ARGV[at])
flush('HSET', KEYS[5], at + 1, count)
return {jobs}
