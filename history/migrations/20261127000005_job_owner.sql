-- Who a job belongs to (XXL-JOB's `author`, which the importer fills).
ALTER TABLE job
    ADD COLUMN owner VARCHAR(64) NOT NULL DEFAULT '' AFTER description;
