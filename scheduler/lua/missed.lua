-- Records fires a job missed (prepended to the claim and reassign scripts).
-- `key` is the partition's misfires hash: field = job id, value = JSON
-- {"skipped": <fires that never ran, in all>, "recent": [<record>, ...]}
-- with the newest record first and at most 20 kept. `record` is the JSON
-- of one rondo_core::schedule::Missed occurrence, written by the caller.
local function record_missed(key, job, skipped, record)
  local current = redis.call('HGET', key, job)
  local state
  if current then
    local ok, decoded = pcall(cjson.decode, current)
    if ok and type(decoded) == 'table' then state = decoded end
  end
  state = state or {}
  state.skipped = (tonumber(state.skipped) or 0) + tonumber(skipped)
  local recent = type(state.recent) == 'table' and state.recent or {}
  table.insert(recent, 1, cjson.decode(record))
  while #recent > 20 do table.remove(recent) end
  state.recent = recent
  redis.call('HSET', key, job, cjson.encode(state))
end
