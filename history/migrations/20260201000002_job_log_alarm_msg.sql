-- What the result monitor's alarm said about a failed trigger (which channel
-- failed and why, or what was sent), next to job_log.alarm_status. Written
-- by the `alarm.status` event; NULL until one arrives. Additive.
ALTER TABLE job_log
    ADD COLUMN alarm_msg TEXT NULL AFTER alarm_status;
