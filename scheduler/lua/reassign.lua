-- Move a dead node's ring members to live nodes' rings, or drop them
-- (misfire DO_NOTHING, job gone), for one leader term (fenced).
--
-- KEYS[1]   the partition's term key
-- KEYS[2]   the dead node's ring
-- KEYS[3]   the partition's ring owners set
-- KEYS[4]   the partition's misfires hash (see missed.lua)
-- KEYS[5..] target ring keys (live nodes)
-- ARGV[1]   the caller's term
-- ARGV[2]   the dead node's id
-- ARGV[3]   n, the number of target nodes; ARGV[4 .. 3+n] their ids (in
--           the order of their ring keys)
-- then, per member: member, target key index into KEYS (0 = drop), score,
-- its name in the target ring ('' = the same), the fires its job missed
-- and their record ('' = none; recorded only if this member is handled).
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
  local rename, missed, record = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  if redis.call('ZREM', KEYS[2], member) == 1 then
    if target == 0 then
      dropped = dropped + 1
    else
      if rename == '' then rename = member end
      redis.call('ZADD', KEYS[target], score, rename)
      moved = moved + 1
    end
    if record ~= '' then
      record_missed(KEYS[4], string.match(member, '^%d+'), missed, record)
    end
  end
  i = i + 6
end
if redis.call('ZCARD', KEYS[2]) == 0 then
  redis.call('SREM', KEYS[3], ARGV[2])
end
return {moved, dropped}
