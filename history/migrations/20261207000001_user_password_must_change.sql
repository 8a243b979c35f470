-- A user who must set a new password before anything else: one moved
-- from XXL-JOB, after the first sign-in with the old (weak, unsalted)
-- password. Until `PUT /api/v1/auth/password` clears it, their session
-- reaches only who-am-I, the password change and sign-out.
ALTER TABLE `user`
    ADD COLUMN must_change_password TINYINT NOT NULL DEFAULT 0;
