-- rcp-pg schema, version 2: an inverted index for BM25.
--
-- Version 1 ranked by expanding the tsvector of every document that shared a query lexeme
-- (on Cranfield, 60% of the collection for a typical query: 50 ms at 1,400 documents). A
-- postings row per (lexeme, document) lets a query read only its own terms' postings.

CREATE TABLE rcp_postings (
    lexeme  text    NOT NULL,
    doc_id  text    NOT NULL,
    -- Occurrences of the lexeme in the document, and the document's length (both BM25 inputs).
    tf      integer NOT NULL,
    doc_len integer NOT NULL,
    PRIMARY KEY (lexeme, doc_id)
);

-- Writes replace a document's postings by id.
CREATE INDEX rcp_postings_doc ON rcp_postings (doc_id);

INSERT INTO rcp_postings (lexeme, doc_id, tf, doc_len)
SELECT x.lexeme, d.id, cardinality(x.positions), d.doc_len
FROM rcp_documents d CROSS JOIN LATERAL unnest(d.tsv) AS x;
