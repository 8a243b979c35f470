-- Raise a partition's accepted term (never lower it).
-- KEYS[1] the partition's term key; ARGV[1] the new leader's term.
-- Returns the term the partition accepts afterwards.
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local term = tonumber(ARGV[1])
if term > current then
  redis.call('SET', KEYS[1], ARGV[1])
  return term
end
return current
