-- The console's log list filters by group, job, status and time and pages
-- newest first: `state` is the status the daily report counts (0 running:
-- sent, no result yet; 1 success: the handler answered 200; 2 failure: the
-- trigger failed or the handler answered another code), kept in the row,
-- and each filter has an index ending in (fire_ms, trigger_id) so a page
-- reads a page, in every day partition. Nothing reads job_log by
-- trigger_time: its indexes go (they cost every write).
ALTER TABLE job_log
    ADD COLUMN state TINYINT AS (CASE
        WHEN handle_code = 200 THEN 1
        WHEN trigger_code <> 200 OR COALESCE(handle_code, 0) NOT IN (0, 200) THEN 2
        ELSE 0 END) STORED,
    DROP KEY idx_job_log_job_time,
    DROP KEY idx_job_log_handle_code_time,
    DROP KEY idx_job_log_trigger_time,
    ADD KEY idx_job_log_fire (fire_ms),
    ADD KEY idx_job_log_job_fire (job_id, fire_ms),
    ADD KEY idx_job_log_group_fire (group_app, fire_ms),
    ADD KEY idx_job_log_state_fire (state, fire_ms),
    ADD KEY idx_job_log_group_state_fire (group_app, state, fire_ms);
