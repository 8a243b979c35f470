-- Deletes a trigger's log id key only if it still holds this claimer's log
-- id: a claimer that lost the trigger's mark undoes what it wrote, never
-- the winner's.
-- KEYS[1] = ns:xxl:tid:<trigger id>; ARGV[1] = the log id written
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
