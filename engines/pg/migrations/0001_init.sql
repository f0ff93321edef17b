-- rcp-pg schema, version 1. Applied once by `rcp-pg migrate` (or `serve`/`index`, which
-- migrate first) inside one transaction under an advisory lock.

CREATE EXTENSION IF NOT EXISTS vector;

-- The text search document of a row: title and body, English stemming and stop words.
CREATE FUNCTION rcp_doc_tsv(title text, body text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT to_tsvector('english'::regconfig, coalesce(title, '') || ' ' || body) $$;

-- Token count of a tsvector (the BM25 document length): the number of positions.
CREATE FUNCTION rcp_tsv_len(doc tsvector) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT coalesce(sum(cardinality(positions)), 0)::integer FROM unnest(doc) $$;

-- A §4.6 timestamp (RFC 3339 string or integer epoch milliseconds) as epoch milliseconds;
-- NULL for anything else. Strings without an offset are UTC.
CREATE FUNCTION rcp_epoch_ms(v jsonb) RETURNS bigint
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET timezone = 'UTC'
    AS $$
BEGIN
    IF jsonb_typeof(v) = 'number' THEN
        RETURN CASE WHEN (v #>> '{}')::numeric = trunc((v #>> '{}')::numeric) THEN (v #>> '{}')::numeric::bigint END;
    ELSIF jsonb_typeof(v) = 'string' THEN
        RETURN (extract(epoch FROM (v #>> '{}')::timestamptz) * 1000)::bigint;
    END IF;
    RETURN NULL;
EXCEPTION WHEN others THEN
    RETURN NULL;
END $$;

CREATE TABLE rcp_documents (
    id           text PRIMARY KEY,
    title        text,
    body         text NOT NULL,
    metadata     jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- sha256 of title and body: an upsert with unchanged text keeps its embedding.
    content_hash text NOT NULL,
    embedding    vector(384) NOT NULL,
    tsv          tsvector GENERATED ALWAYS AS (rcp_doc_tsv(title, body)) STORED,
    doc_len      integer GENERATED ALWAYS AS (rcp_tsv_len(rcp_doc_tsv(title, body))) STORED,
    -- rcp_state.version of the write that last changed the row.
    version      bigint NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX rcp_documents_tsv ON rcp_documents USING gin (tsv);

-- Document frequency of every lexeme, for BM25's idf; maintained by every write.
CREATE TABLE rcp_terms (
    lexeme text PRIMARY KEY,
    df     bigint NOT NULL
);

-- One row: the change counter (indexVersion) and the collection figures BM25 needs. Every
-- write updates it first, so writers serialise on its row lock and versions are gap-free.
CREATE TABLE rcp_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version   bigint NOT NULL,
    doc_count bigint NOT NULL,
    total_len bigint NOT NULL
);
INSERT INTO rcp_state (singleton, version, doc_count, total_len) VALUES (true, 0, 0, 0);

-- Typed filter fields (§8) advertised in `filter.fields`.
CREATE TABLE rcp_fields (
    name text PRIMARY KEY,
    type text NOT NULL
);
