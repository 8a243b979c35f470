-- The log tables partitioned by day, so that retention drops whole days
-- (ALTER TABLE … DROP PARTITION: a metadata change, no row-by-row DELETE,
-- no purge lag, no locks held for minutes).
--
-- Layout: RANGE partitions on epoch milliseconds, one per UTC day, named
-- `pYYYYMMDD` with `VALUES LESS THAN (<start of the next day in ms>)`, and a
-- catch-all `pmax VALUES LESS THAN MAXVALUE`. This migration only creates
-- `pmax` (a migration cannot know "today"); the worker's maintenance
-- (src/partitions.rs) splits day partitions off `pmax` for today and the
-- next days with `REORGANIZE PARTITION pmax INTO (pYYYYMMDD, pmax)`, which
-- copies only the rows of `pmax` (normally none), and retention drops the
-- day partitions older than `persist.retention_days`.
--
-- Upgrade: existing rows are kept. They start in `pmax`; the first
-- maintenance pass splits them into day partitions once (one copy of the
-- table, the same cost as this ALTER).
--
-- job_log: MySQL/MariaDB need the partitioning column in every unique key.
-- The primary key (trigger_id, fire_ms) has it and the secondary indexes
-- (idx_job_log_job_time, idx_job_log_handle_code_time,
-- idx_job_log_trigger_time) are not unique, so no key changes.
ALTER TABLE job_log
    PARTITION BY RANGE (fire_ms) (
        PARTITION pmax VALUES LESS THAN MAXVALUE
    );

-- job_log_line has no fire_ms and its events do not carry one, so it is
-- partitioned by its own time, ts_ms, on the same day boundaries; the
-- primary key becomes (trigger_id, seq, ts_ms) to include it.
--
-- Why not delete lines of the dropped days by joining job_log in bounded
-- batches: that is exactly the DELETE … LIMIT loop this layout avoids, and
-- it needs the trigger ids before the job_log partition is gone.
--
-- Idempotence is kept: a re-delivered line carries the same ts_ms, so it
-- hits the same key and `ON DUPLICATE KEY UPDATE seq = seq` leaves it as it
-- was. Reads by trigger id still use the primary key's prefix. A line
-- logged just after midnight by a trigger fired before it lives one day
-- longer than its job_log row: retention is by day either way.
ALTER TABLE job_log_line
    DROP PRIMARY KEY,
    ADD PRIMARY KEY (trigger_id, seq, ts_ms)
    PARTITION BY RANGE (ts_ms) (
        PARTITION pmax VALUES LESS THAN MAXVALUE
    );
