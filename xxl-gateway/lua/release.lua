-- Gives a claimed trigger back unsent: its mark and claim go together, so
-- whoever receives it next claims it afresh; only while the claim is still
-- this hand-off's.
-- KEYS[1] = ns:dedupe:<tid>; KEYS[2] = ns:xxl:claim:{ns:dedupe:<tid>}
-- ARGV[1] = the claim
-- Returns 1 when released.
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2])
return 1
