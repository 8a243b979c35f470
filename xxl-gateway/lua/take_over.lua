-- Takes a trigger's claim over from the hand-off that held it (one cut
-- short: its instance died, or an error ended it), if it still holds it:
-- of several instances trying, one wins. The mark's TTL is renewed with
-- the claim's, so neither outlives the other.
-- KEYS[1] = ns:xxl:claim:{ns:dedupe:<tid>}; KEYS[2] = ns:dedupe:<tid>
-- ARGV[1] = the claim as read ('' when there was none); ARGV[2] = the new
-- claim; ARGV[3] = TTL (s)
-- Returns 1 when taken over.
local current = redis.call('GET', KEYS[1]) or ''
if current ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return 1
