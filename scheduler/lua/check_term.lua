-- Check a leader term and change nothing: for a leader's work outside
-- Redis (draining a dead executor's queue) that must stop once a newer
-- leader exists.
--
-- KEYS[1] the partition's term key
-- ARGV[1] the caller's term
--
-- Returns 1, or STALE_TERM.
local refused = refuse_stale_term()
if refused then return refused end
return 1
