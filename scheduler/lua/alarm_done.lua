-- Forgets a sent (or given up) alarm, if the sender still holds it: a
-- sender whose lease lapsed finds another's token and leaves it alone.
-- KEYS[1] sending:<job>, KEYS[2] inflight. ARGV: job id, token.
-- Returns 1 when forgotten, 0 when another sender holds it.
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
