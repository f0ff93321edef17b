-- rcp-pg schema, version 5: each document's trust level (`hit.trust.level`, §15.2), set by the
-- operator: `rcp-pg index --trust` for a corpus it loads (default `trusted`), `rcp-pg serve
-- --added-trust` for `index/add` writes (default `community`, never `trusted`). A chunk's hits
-- carry its document's level.
--
-- Documents written before this version have no recorded provenance, so they are `untrusted`
-- until written again (re-running `rcp-pg index` over the same corpus sets the level and keeps
-- every unchanged embedding).

ALTER TABLE rcp_documents ADD COLUMN trust text NOT NULL DEFAULT 'untrusted'
    CONSTRAINT rcp_documents_trust CHECK (trust IN ('trusted', 'community', 'untrusted'));
