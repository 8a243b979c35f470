-- Script jobs (XXL-JOB's GLUE): the job row keeps its current script, and
-- job_glue keeps its versions (XXL-JOB's xxl_job_logglue, the newest 30 per
-- job), written by the persistence worker from job.upsert events: one row
-- per (job, version), so a redelivered event inserts nothing twice.
ALTER TABLE job
    ADD COLUMN glue_type       VARCHAR(32)     NOT NULL DEFAULT 'BEAN' AFTER alarm_webhook,
    ADD COLUMN glue_source     MEDIUMTEXT      NULL                    AFTER glue_type,
    ADD COLUMN glue_remark     VARCHAR(255)    NOT NULL DEFAULT ''     AFTER glue_source,
    ADD COLUMN glue_version    INT UNSIGNED    NOT NULL DEFAULT 0      AFTER glue_remark,
    ADD COLUMN glue_updated_ms BIGINT          NOT NULL DEFAULT 0      AFTER glue_version;

CREATE TABLE IF NOT EXISTS job_glue (
    job_id      BIGINT UNSIGNED NOT NULL,
    version     INT UNSIGNED    NOT NULL,
    glue_type   VARCHAR(32)     NOT NULL,
    glue_source MEDIUMTEXT      NOT NULL,
    glue_remark VARCHAR(255)    NOT NULL DEFAULT '',
    created_ms  BIGINT          NOT NULL,
    PRIMARY KEY (job_id, version)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
