-- rcp-pg schema, version 4: chunk units (`index/add` with `chunk: true`, `retrieve` with
-- `unit: "chunk"`).
--
-- A document added with `chunk: true` keeps its row in rcp_documents (whole text, title,
-- metadata: what filters read and what a `unit: "document"` hit returns) but is not searched
-- there: it has no embedding, no postings and does not count in doc_count/total_len. Its
-- chunks are searched instead, each a row of rcp_chunks with its own tsvector, postings and
-- embedding. BM25's collection is every searched row: whole documents and chunks.

ALTER TABLE rcp_documents ADD COLUMN chunked boolean NOT NULL DEFAULT false;
ALTER TABLE rcp_documents ALTER COLUMN embedding DROP NOT NULL;
ALTER TABLE rcp_documents ADD CONSTRAINT rcp_documents_embedded CHECK (chunked OR embedding IS NOT NULL);

CREATE TABLE rcp_chunks (
    doc_id       text    NOT NULL REFERENCES rcp_documents (id) ON DELETE CASCADE,
    -- Position in the document, from 0.
    idx          integer NOT NULL,
    -- UTF-8 byte offsets into the document's text, half-open: body is exactly that slice.
    start_byte   integer NOT NULL,
    end_byte     integer NOT NULL,
    body         text    NOT NULL,
    -- sha256 of the document's title and this chunk's text: an unchanged chunk keeps its embedding.
    content_hash text    NOT NULL,
    -- The embedding of the document's title and this chunk's text.
    embedding    vector(384) NOT NULL,
    -- The document's title and this chunk's text, as rcp_doc_tsv makes it, and its length.
    tsv          tsvector NOT NULL,
    doc_len      integer NOT NULL,
    version      bigint  NOT NULL,
    PRIMARY KEY (doc_id, idx),
    CHECK (0 <= idx AND 0 <= start_byte AND start_byte <= end_byte)
);

-- BM25 postings of the chunks, as rcp_postings holds those of whole documents.
CREATE TABLE rcp_chunk_postings (
    lexeme  text    NOT NULL,
    doc_id  text    NOT NULL,
    chunk   integer NOT NULL,
    tf      integer NOT NULL,
    doc_len integer NOT NULL,
    PRIMARY KEY (lexeme, doc_id, chunk)
);
CREATE INDEX rcp_chunk_postings_doc ON rcp_chunk_postings (doc_id);

-- doc_count/total_len keep counting the searched whole documents; chunked documents and their
-- chunks are counted here. BM25 ranks over doc_count + chunk_count rows.
ALTER TABLE rcp_state
    ADD COLUMN chunked_docs bigint NOT NULL DEFAULT 0,
    ADD COLUMN chunk_count  bigint NOT NULL DEFAULT 0,
    ADD COLUMN chunk_len    bigint NOT NULL DEFAULT 0;
