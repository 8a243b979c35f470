-- Whether the XXL-JOB gateway serves a group (an admin's choice), and the
-- group's XXL-JOB access tokens (a JSON object: token, previous,
-- changed_ms; empty when none is set). Groups made before are native.
ALTER TABLE executor_group
    ADD COLUMN xxl_gateway TINYINT(1) NOT NULL DEFAULT 0 AFTER xxl_addresses,
    ADD COLUMN xxl_access TEXT NOT NULL DEFAULT ('') AFTER xxl_gateway;
