-- The alarm channels a job's failures go to (a JSON array of channel
-- names, see docs/jobs.md, Alarms). NULL: none.
ALTER TABLE job
    ADD COLUMN alarm_channels TEXT NULL AFTER alarm_webhook;
