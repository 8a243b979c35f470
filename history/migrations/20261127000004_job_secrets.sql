-- A job's named secrets (a JSON object, name -> value), kept so a rebuilt
-- Redis gets them back. rondo never answers with them; see
-- docs/security.md (Secrets). NULL: none.
ALTER TABLE job
    ADD COLUMN secrets TEXT NULL AFTER import_ref;
