-- Read the members of a partition's sorted set due by now, for one leader
-- term (fenced): the retries whose backoff passed, the in-flight triggers
-- old enough to be lost.
--
-- KEYS[1] the partition's term key
-- KEYS[2] the sorted set (same partition, same hash tag)
-- ARGV[1] the caller's term
-- ARGV[2] the highest score to read
-- ARGV[3] how many members at most
--
-- Returns the members, lowest score first.
local refused = refuse_stale_term()
if refused then return refused end
return redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
