-- Writes a trigger's `finished` mark (the result the gateway answers it
-- with), only while the claim is still this hand-off's: a callback that
-- settled the trigger meanwhile (its claim gone) or another instance that
-- took it over keeps the trigger.
-- KEYS[1] = ns:dedupe:<tid>; KEYS[2] = ns:xxl:claim:{ns:dedupe:<tid>}
-- ARGV[1] = the claim; ARGV[2] = the finished mark (JSON); ARGV[3] = TTL (s)
-- Returns 1 when written.
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
return 1
