-- rondo's MySQL schema: the system of record for definitions (executor_group,
-- job) and the history of every trigger (job_log, job_log_line).
--
-- Every table is written by the persistence worker with idempotent upserts;
-- see persist-worker/src/upsert.rs for the rules that make a late or repeated
-- event harmless. Times written by rondo are UTC (the worker's sessions run
-- with time_zone '+00:00').

-- XXL-JOB's xxl_job_group. `deleted` is a tombstone so that a late, older
-- upsert cannot bring a deleted group back.
CREATE TABLE IF NOT EXISTS executor_group (
    app         VARCHAR(64)  NOT NULL,
    title       VARCHAR(255) NOT NULL DEFAULT '',
    updated_ms  BIGINT       NOT NULL,
    deleted     TINYINT      NOT NULL DEFAULT 0,
    PRIMARY KEY (app)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- XXL-JOB's xxl_job_info: every field of rondo_core::Job, so Redis can be
-- rebuilt from here. child_jobs is a JSON array of job ids.
CREATE TABLE IF NOT EXISTS job (
    id              BIGINT UNSIGNED NOT NULL,
    group_app       VARCHAR(64)     NOT NULL DEFAULT '',
    description     VARCHAR(255)    NOT NULL DEFAULT '',
    schedule_type   VARCHAR(16)     NOT NULL DEFAULT 'NONE',
    schedule_conf   VARCHAR(1024)   NOT NULL DEFAULT '',
    misfire         VARCHAR(32)     NOT NULL DEFAULT 'DO_NOTHING',
    routing         VARCHAR(32)     NOT NULL DEFAULT 'FIRST',
    block_strategy  VARCHAR(32)     NOT NULL DEFAULT 'SERIAL_EXECUTION',
    handler         VARCHAR(255)    NOT NULL DEFAULT '',
    params          MEDIUMTEXT      NULL,
    timeout_s       INT UNSIGNED    NOT NULL DEFAULT 0,
    retries         INT UNSIGNED    NOT NULL DEFAULT 0,
    child_jobs      TEXT            NULL,
    alarm_email     VARCHAR(255)    NOT NULL DEFAULT '',
    enabled         TINYINT         NOT NULL DEFAULT 1,
    created_ms      BIGINT          NOT NULL DEFAULT 0,
    updated_ms      BIGINT          NOT NULL,
    deleted         TINYINT         NOT NULL DEFAULT 0,
    PRIMARY KEY (id),
    KEY idx_job_group (group_app)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- XXL-JOB's xxl_job_log: one row per trigger, written from two events. The
-- trigger event fills the trigger_* side, the executor's result the handle_*
-- side, in whichever order they arrive.
--
-- The key is (trigger_id, fire_ms): both events carry fire_ms, so both land
-- on the same row, and a later `PARTITION BY RANGE (fire_ms)` with one
-- partition per day (MySQL needs the partitioning column in every unique
-- key) is a metadata change, not a redesign. Day boundaries are epoch ms.
CREATE TABLE IF NOT EXISTS job_log (
    trigger_id     VARCHAR(96)     NOT NULL,
    fire_ms        BIGINT          NOT NULL,
    job_id         BIGINT UNSIGNED NOT NULL,
    group_app      VARCHAR(64)     NOT NULL DEFAULT '',
    executor_id    VARCHAR(255)    NOT NULL DEFAULT '',
    handler        VARCHAR(255)    NOT NULL DEFAULT '',
    params         MEDIUMTEXT      NULL,
    shard_index    INT UNSIGNED    NOT NULL DEFAULT 0,
    shard_total    INT UNSIGNED    NOT NULL DEFAULT 1,
    retry_count    INT UNSIGNED    NOT NULL DEFAULT 0,
    trigger_type   VARCHAR(16)     NOT NULL DEFAULT '',
    -- When the dispatcher published it (Trigger.sent_ms); NULL until the
    -- trigger event arrives.
    trigger_time   DATETIME(3)     NULL,
    trigger_code   INT             NULL,
    trigger_msg    TEXT            NULL,
    handle_start   DATETIME(3)     NULL,
    -- When the handler ended; NULL/0 handle_code = still running.
    handle_time    DATETIME(3)     NULL,
    handle_code    INT             NULL,
    handle_msg     TEXT            NULL,
    -- XXL-JOB: 0 default, -1 locked, 1 no alarm needed, 2 sent, 3 failed.
    alarm_status   TINYINT         NOT NULL DEFAULT 0,
    updated_at     DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (trigger_id, fire_ms),
    KEY idx_job_log_job_time (job_id, trigger_time),
    KEY idx_job_log_handle_code_time (handle_code, trigger_time),
    KEY idx_job_log_trigger_time (trigger_time)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The lines a handler logged, numbered from 0 per trigger.
CREATE TABLE IF NOT EXISTS job_log_line (
    trigger_id  VARCHAR(96)  NOT NULL,
    seq         INT UNSIGNED NOT NULL,
    ts_ms       BIGINT       NOT NULL,
    line        TEXT         NOT NULL,
    PRIMARY KEY (trigger_id, seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- XXL-JOB's xxl_job_log_report: triggers per day by outcome (filled later).
CREATE TABLE IF NOT EXISTS log_report (
    day            DATE         NOT NULL,
    running_count  INT UNSIGNED NOT NULL DEFAULT 0,
    success_count  INT UNSIGNED NOT NULL DEFAULT 0,
    fail_count     INT UNSIGNED NOT NULL DEFAULT 0,
    updated_at     DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (day)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Console users (XXL-JOB's xxl_job_user); used by a later issue.
CREATE TABLE IF NOT EXISTS `user` (
    username       VARCHAR(64)  NOT NULL,
    password_hash  VARCHAR(255) NOT NULL,
    role           VARCHAR(32)  NOT NULL DEFAULT 'user',
    created_at     DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (username)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
