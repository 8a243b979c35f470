-- Two job fields for users coming from XXL-JOB: the IANA time zone its cron
-- is read in, and its own misfire threshold (NULL: the cluster's). Additive,
-- with defaults that mean "as before" (UTC, the cluster's threshold), so rows
-- written before this migration stay valid and older workers' inserts still
-- succeed.
ALTER TABLE job
    ADD COLUMN zone                 VARCHAR(64)     NOT NULL DEFAULT 'UTC' AFTER schedule_conf,
    ADD COLUMN misfire_threshold_ms BIGINT UNSIGNED NULL     DEFAULT NULL  AFTER misfire;
