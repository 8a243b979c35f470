-- The console's job list pages through the `job` mirror by filter and sort
-- at a million jobs: each filter and each sort has an index that yields its
-- rows in the page's order, so a page reads a page (group_app has one).
ALTER TABLE job
    ADD KEY idx_job_enabled (enabled, id),
    ADD KEY idx_job_schedule_type (schedule_type, id),
    ADD KEY idx_job_description (description, id),
    ADD KEY idx_job_updated (updated_ms, id);
