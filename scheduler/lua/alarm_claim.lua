-- Claims up to ARGV[3] alarms for one sender (alarm::outbox): those whose
-- sender's lease lapsed (claimed again, under this claim's token) and
-- those due (the pending alarm moved to its sending key; a job whose last
-- alarm is still being sent waits a second). The pending, sending and
-- last keys share the declared keys' hash tag.
-- KEYS[1] due, KEYS[2] inflight.
-- ARGV: now, lease end, max, pending prefix, sending prefix, last prefix,
-- throttle ms, token.
-- Returns the job ids claimed.
local now, lease, max = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local throttle, token = tonumber(ARGV[7]), ARGV[8]
local claimed = {}
for _, job in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, max)) do
  redis.call('ZADD', KEYS[2], lease, job)
  redis.call('HSET', ARGV[5] .. job, 'token', token)
  table.insert(claimed, job)
end
for _, job in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, max)) do
  if #claimed >= max then break end
  if redis.call('ZSCORE', KEYS[2], job) then
    redis.call('ZADD', KEYS[1], now + 1000, job)
  else
    redis.call('ZREM', KEYS[1], job)
    local fields = redis.call('HGETALL', ARGV[4] .. job)
    if #fields > 0 then
      redis.call('HSET', ARGV[5] .. job, unpack(fields))
      redis.call('HSET', ARGV[5] .. job, 'token', token)
      redis.call('DEL', ARGV[4] .. job)
      if throttle > 0 then
        redis.call('SET', ARGV[6] .. job, now, 'PX', throttle)
      end
      redis.call('ZADD', KEYS[2], lease, job)
      table.insert(claimed, job)
    end
  end
end
return claimed
