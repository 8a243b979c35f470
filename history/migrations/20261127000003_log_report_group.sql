-- The daily report per group, so that a user who may read some groups is
-- shown the runs of those groups only; log_report keeps the day's totals,
-- and `by_group` says the day's per-group rows were counted with them (a
-- day counted before this table existed is counted again when asked for).
CREATE TABLE IF NOT EXISTS log_report_group (
    day            DATE         NOT NULL,
    group_app      VARCHAR(64)  NOT NULL,
    running_count  INT UNSIGNED NOT NULL DEFAULT 0,
    success_count  INT UNSIGNED NOT NULL DEFAULT 0,
    fail_count     INT UNSIGNED NOT NULL DEFAULT 0,
    PRIMARY KEY (day, group_app)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

ALTER TABLE log_report ADD COLUMN by_group TINYINT NOT NULL DEFAULT 0;
