-- Folds a failure into its job's pending alarm (alarm::outbox).
-- KEYS[1] pending:<job>, KEYS[2] due, KEYS[3] last:<job>.
-- ARGV: job id, trigger id, failure JSON, now, gather ms, throttle ms.
-- Returns {failures so far, lead trigger id, due at}.
local n = redis.call('HINCRBY', KEYS[1], 'count', 1)
if n == 1 then
  redis.call('HSET', KEYS[1], 'lead', ARGV[2], 'failure', ARGV[3])
  local last = tonumber(redis.call('GET', KEYS[3]) or '0')
  local at = math.max(tonumber(ARGV[4]) + tonumber(ARGV[5]), last + tonumber(ARGV[6]))
  redis.call('ZADD', KEYS[2], at, ARGV[1])
  return {n, ARGV[2], at}
end
local at = redis.call('ZSCORE', KEYS[2], ARGV[1]) or '0'
return {n, redis.call('HGET', KEYS[1], 'lead'), math.floor(tonumber(at))}
