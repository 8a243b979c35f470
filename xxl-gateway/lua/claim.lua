-- Claims a trigger for one hand-off: its dedupe mark (`running`) and its
-- claim (`<log id> <instance>`), both only if it has no mark, in one step.
-- The claim is the one token of who sends the trigger: every change of
-- hands goes through a compare-and-set of it (take_over.lua), and the mark
-- and the claim share a hash slot (the claim's hash tag is the mark's key),
-- so this script runs on a Redis Cluster too.
-- KEYS[1] = ns:dedupe:<tid>; KEYS[2] = ns:xxl:claim:{ns:dedupe:<tid>}
-- ARGV[1] = the running mark (JSON); ARGV[2] = the claim; ARGV[3] = TTL (s)
-- Returns {1} when claimed, else {0, mark or false, claim or false}.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[3]) then
  redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
  return {1}
end
return {0, redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2])}
