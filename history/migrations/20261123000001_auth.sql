-- Sign-in (issue 11): users, API tokens and the audit log.
--
-- The `user` table of the first schema was a placeholder (username,
-- password_hash, role); it gains what sign-in needs. Roles are `admin`,
-- `operator` and `viewer`; `groups_granted` is a JSON array of executor
-- group names (ignored for an admin).
ALTER TABLE `user`
    MODIFY role VARCHAR(16) NOT NULL DEFAULT 'viewer',
    ADD COLUMN groups_granted TEXT         NULL,
    ADD COLUMN enabled        TINYINT(1)   NOT NULL DEFAULT 1,
    ADD COLUMN created_ms     BIGINT       NOT NULL DEFAULT 0,
    ADD COLUMN updated_ms     BIGINT       NOT NULL DEFAULT 0;

-- API tokens: only the SHA-256 of a token is stored (hex); `prefix` is its
-- first characters, to tell tokens apart in a list.
CREATE TABLE IF NOT EXISTS api_token (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    username     VARCHAR(64)     NOT NULL,
    name         VARCHAR(64)     NOT NULL,
    token_hash   CHAR(64)        NOT NULL,
    prefix       VARCHAR(16)     NOT NULL,
    read_only    TINYINT(1)      NOT NULL DEFAULT 0,
    created_ms   BIGINT          NOT NULL,
    expires_ms   BIGINT          NULL,
    revoked_ms   BIGINT          NULL,
    last_used_ms BIGINT          NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_api_token_hash (token_hash),
    KEY idx_api_token_user (username)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Who changed or ran what, when, from where.
CREATE TABLE IF NOT EXISTS audit_log (
    id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    at_ms      BIGINT          NOT NULL,
    username   VARCHAR(64)     NOT NULL,
    action     VARCHAR(32)     NOT NULL,
    target     VARCHAR(128)    NOT NULL,
    group_app  VARCHAR(64)     NULL,
    address    VARCHAR(64)     NOT NULL DEFAULT '',
    detail     TEXT            NULL,
    PRIMARY KEY (id),
    KEY idx_audit_time (at_ms),
    KEY idx_audit_user_time (username, at_ms),
    KEY idx_audit_target (target)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
