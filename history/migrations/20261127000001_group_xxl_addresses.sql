-- XXL-JOB executors a group is fed from by hand (XXL-JOB's manual address
-- list), a JSON array of addresses; empty for every other group.
ALTER TABLE executor_group
    ADD COLUMN xxl_addresses TEXT NOT NULL DEFAULT ('') AFTER title;
