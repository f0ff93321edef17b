-- rcp-pg schema, version 3: feedback (§7.16) kept in the database.
--
-- rcp-pg processes are stateless: a signal written through one is seen by every other on the
-- same database. Each accepted call is one row of the log; integrity signals
-- (poisonSuspected, injectionSuspected) are also counted per hit, and a hit whose count
-- reaches the server's quarantine threshold is left out of later results.

CREATE TABLE rcp_feedback (
    seq        bigserial   PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    session_id text,
    query      text,
    signals    jsonb       NOT NULL
);

CREATE TABLE rcp_feedback_hits (
    hit_id    text    PRIMARY KEY,
    -- Integrity signals since the hit was last released.
    integrity integer NOT NULL DEFAULT 0
);
