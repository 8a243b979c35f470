-- The job list's owner filter ("my jobs") reads this index.
ALTER TABLE job
    ADD INDEX idx_job_owner (owner, id);
