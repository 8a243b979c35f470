-- Take members out of a partition's sorted set, for one leader term
-- (fenced): a retry once dispatched, a lost trigger before it is failed.
--
-- KEYS[1] the partition's term key
-- KEYS[2] the sorted set (same partition, same hash tag)
-- ARGV[1] the caller's term
-- ARGV[2..] the members
--
-- Returns how many were there, so of two callers only one takes a member.
local refused = refuse_stale_term()
if refused then return refused end
local taken = 0
for i = 2, #ARGV do
  taken = taken + redis.call('ZREM', KEYS[2], ARGV[i])
end
return taken
