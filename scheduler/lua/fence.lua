-- The fence, prepended to every script that acts for a leader term (claim,
-- reassign, retries, the reaper). KEYS[1] is the partition's term key and
-- ARGV[1] the caller's term: a caller whose term is not the one the
-- partition accepts has been deposed by a newer leader, and is refused
-- before the script changes anything.
local function refuse_stale_term()
  local accepted = tonumber(redis.call('GET', KEYS[1]) or '0')
  if tonumber(ARGV[1]) ~= accepted then
    return redis.error_reply('STALE_TERM caller term ' .. ARGV[1] .. ', partition accepts ' .. tostring(accepted))
  end
  return nil
end
