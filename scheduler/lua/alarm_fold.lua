-- Folds a failure into its job's pending alarm (alarm::outbox), once per
-- trigger (a result handled twice, after a crash, is counted once).
-- KEYS[1] pending:<job>, KEYS[2] due, KEYS[3] last:<job>, KEYS[4] seen:<job>.
-- ARGV: job id, trigger id, failure JSON, now, gather ms, throttle ms,
-- how long a trigger is remembered (ms).
-- Returns {failures so far, lead trigger id, due at}.
local first = redis.call('SADD', KEYS[4], ARGV[2])
redis.call('PEXPIRE', KEYS[4], ARGV[7])
local n
if first == 1 then
  n = redis.call('HINCRBY', KEYS[1], 'count', 1)
else
  n = tonumber(redis.call('HGET', KEYS[1], 'count') or '0')
end
if n == 1 and first == 1 then
  redis.call('HSET', KEYS[1], 'lead', ARGV[2], 'failure', ARGV[3])
  local last = tonumber(redis.call('GET', KEYS[3]) or '0')
  local at = math.max(tonumber(ARGV[4]) + tonumber(ARGV[5]), last + tonumber(ARGV[6]))
  redis.call('ZADD', KEYS[2], at, ARGV[1])
  return {n, ARGV[2], at}
end
local at = redis.call('ZSCORE', KEYS[2], ARGV[1]) or '0'
return {n, redis.call('HGET', KEYS[1], 'lead') or ARGV[2], math.floor(tonumber(at))}
