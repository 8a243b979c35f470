-- Move a dead node's ring members to live nodes' rings, or drop them
-- (misfire DO_NOTHING, job gone), for one leader term (fenced).
--
-- KEYS[1]   the partition's term key
-- KEYS[2]   the dead node's ring
-- KEYS[3]   the partition's ring owners set
-- KEYS[4..] target ring keys (live nodes)
-- ARGV[1]   the caller's term
-- ARGV[2]   the dead node's id
-- ARGV[3]   n, the number of target nodes; ARGV[4 .. 3+n] their ids (in
--           the order of their ring keys)
-- then, per member: member, target key index into KEYS (0 = drop), score.
--
-- A member no longer in the dead ring (moved or fired meanwhile) is left
-- alone, so a retried call is harmless. When the dead ring is empty the node
-- leaves the owners set. Returns {moved, dropped}.
local refused = refuse_stale_term()
if refused then return refused end
local targets = tonumber(ARGV[3])
for k = 1, targets do
  redis.call('SADD', KEYS[3], ARGV[3 + k])
end
local moved, dropped = 0, 0
local i = 4 + targets
while i <= #ARGV do
  local member, target, score = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  if redis.call('ZREM', KEYS[2], member) == 1 then
    if target == 0 then
      dropped = dropped + 1
    else
      redis.call('ZADD', KEYS[target], score, member)
      moved = moved + 1
    end
  end
  i = i + 3
end
if redis.call('ZCARD', KEYS[2]) == 0 then
  redis.call('SREM', KEYS[3], ARGV[2])
end
return {moved, dropped}
