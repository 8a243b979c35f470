-- Where `rondo import` took a job from (`xxl-job/<database>#<id>`), so a
-- second import finds the job instead of copying it. Empty for other jobs.
ALTER TABLE job
    ADD COLUMN import_ref VARCHAR(255) NOT NULL DEFAULT '' AFTER glue_updated_ms;
