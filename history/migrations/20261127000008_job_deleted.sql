-- A deleted job's last state (the `job` row becomes a tombstone), so an
-- admin can restore it (POST /api/v1/jobs/{id}/restore). JSON of the job,
-- its secrets included, as `job.secrets` keeps them.
CREATE TABLE IF NOT EXISTS job_deleted (
    id          BIGINT UNSIGNED NOT NULL,
    deleted_ms  BIGINT          NOT NULL,
    job         MEDIUMTEXT      NOT NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
