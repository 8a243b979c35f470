-- Two job fields added to rondo_core::Job after the first schema: the delay
-- before a retry and the alarm webhook. Additive, with defaults that mean
-- "as before" (retry at once, no webhook), so rows written before this
-- migration stay valid and older workers' inserts still succeed.
ALTER TABLE job
    ADD COLUMN retry_backoff_s INT UNSIGNED  NOT NULL DEFAULT 0  AFTER child_jobs,
    ADD COLUMN alarm_webhook   VARCHAR(1024) NOT NULL DEFAULT '' AFTER alarm_email;
