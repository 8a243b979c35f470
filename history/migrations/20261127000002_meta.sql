-- Facts about the database itself, each set once (issue 36): today
-- `first_admin`, set when the first admin from the config was made (or
-- found unnecessary), so that it is made only once in the database's life:
-- a user table emptied later never brings the config's admin back.
CREATE TABLE IF NOT EXISTS rondo_meta (
    name   VARCHAR(64)  NOT NULL,
    value  VARCHAR(255) NOT NULL,
    set_ms BIGINT       NOT NULL,
    PRIMARY KEY (name)
);

-- A database that has users already has had its first admin.
INSERT IGNORE INTO rondo_meta (name, value, set_ms)
    SELECT 'first_admin', 'users existed before this table', 0 FROM `user` LIMIT 1;
