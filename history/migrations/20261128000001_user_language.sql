-- The web console's language a user chose for themselves
-- (PUT /api/v1/auth/language): a BCP 47 tag of `rondo_model::language`
-- (`zh-CN`, `zh-TW`, `en`); NULL until chosen, when the console follows
-- the browser.
ALTER TABLE `user`
    ADD COLUMN language VARCHAR(16) NULL;
