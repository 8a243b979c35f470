-- Audit rows arrive as events through the persistence worker (a MySQL
-- outage delays them and loses none): each carries a unique id, so a
-- redelivered event keeps one row.
ALTER TABLE audit_log
    ADD COLUMN event_id VARCHAR(40) NULL AFTER id,
    ADD UNIQUE KEY uk_audit_event (event_id),
    ADD KEY idx_audit_action_time (action, at_ms),
    ADD KEY idx_audit_group_time (group_app, at_ms);

-- A token made with another token names it: revoking a token revokes the
-- tokens made with it.
ALTER TABLE api_token
    ADD COLUMN parent_id BIGINT UNSIGNED NULL AFTER read_only,
    ADD KEY idx_api_token_parent (parent_id);
