-- A standby takes the coming fires of a node whose lease on its ring of
-- this partition has lapsed: they move, with their instants and names, to
-- the standby's own ring, which it fires. Not fenced by the term (the
-- leader's failover is, later): the lease is the check, in the same step,
-- so a node that renewed or took its lease back keeps its ring.
--
-- KEYS[1]  the lapsed node's lease key
-- KEYS[2]  the lapsed node's ring
-- KEYS[3]  the standby's ring
-- KEYS[4]  the partition's ring owners set
-- ARGV[1]  take members due by this instant (ms)
-- ARGV[2]  the standby's node id
-- ARGV[3]  at most this many members
--
-- Returns the number taken, or -1 if the lease is held.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return -1
end
local members = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1],
  'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[3]))
if #members == 0 then
  return 0
end
redis.call('SADD', KEYS[4], ARGV[2])
local taken = 0
for i = 1, #members, 2 do
  redis.call('ZADD', KEYS[3], members[i + 1], members[i])
  redis.call('ZREM', KEYS[2], members[i])
  taken = taken + 1
end
return taken
