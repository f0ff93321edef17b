//! Writes, each one transaction: upserts of documents and their chunks (only new or changed
//! text embedded), deletes, and the collection statistics and postings every write keeps in
//! step (see the module docs of [`super`]).

use std::collections::HashMap;

use serde_json::Value;

use super::{NewDoc, Store, passage};
use crate::db::DbError;
use crate::query::vector_literal;

impl Store {
    /// The stored content hash of each of `ids` that exists (a chunked document's is marked
    /// as such, so it never matches the same text added whole).
    pub async fn hashes(&self, ids: &[String]) -> Result<HashMap<String, String>, DbError> {
        let client = self.db.client().await?;
        Ok(Stored::read(&**client, ids, false).await?.docs)
    }

    /// Upserts `docs` (their `vector`s unset) in one transaction and returns the new version
    /// once committed: acknowledged means committed.
    ///
    /// Only new or changed text (by [`content_hash`](super::content_hash)) is passed to
    /// `embed` (passages in document order, a chunked document's chunks in their order, one
    /// vector each); an unchanged document, or an unchanged chunk at the same position, keeps
    /// its stored vector.
    /// If another writer changes or removes such a document before this transaction takes the
    /// writers' lock, it is embedded then, under the lock (rare). A chunked document's chunks
    /// replace all its previous ones (and a document added whole again loses them).
    pub async fn put<X, E, F>(&self, mut docs: Vec<NewDoc>, embed: E) -> Result<i64, X>
    where
        X: From<DbError>,
        E: Fn(Vec<String>) -> F,
        F: Future<Output = Result<Vec<Vec<f32>>, X>>,
    {
        let ids: Vec<String> = docs.iter().map(|d| d.id.clone()).collect();
        let chunking = docs.iter().any(|d| d.chunks.is_some());
        let stored = {
            let client = self.db.client().await?;
            Stored::read(&**client, &ids, chunking).await?
        };
        let todo = stored.missing(&docs);
        fill(&mut docs, &todo, &embed).await?;
        let mut client = self.db.client().await?;
        let tx = client.transaction().await.map_err(DbError::from)?;
        let version: i64 = tx
            .query_one("UPDATE rcp_state SET version = version + 1 RETURNING version", &[])
            .await
            .map_err(DbError::from)?
            .get(0);
        let reused: Vec<String> = docs.iter().filter(|d| d.reuses()).map(|d| d.id.clone()).collect();
        if !reused.is_empty() {
            let current = Stored::read(&*tx, &reused, chunking).await?;
            let stale = current.missing(&docs);
            fill(&mut docs, &stale, &embed).await?;
        }
        let titles: Vec<Option<String>> = docs.iter().map(|d| d.title.clone()).collect();
        let bodies: Vec<String> = docs.iter().map(|d| d.body.clone()).collect();
        let metas: Vec<Value> = docs.iter().map(|d| d.metadata.clone()).collect();
        let hashes: Vec<String> = docs.iter().map(|d| d.hash.clone()).collect();
        let vectors: Vec<Option<String>> = docs.iter().map(|d| d.vector.as_deref().map(vector_literal)).collect();
        let chunked: Vec<bool> = docs.iter().map(|d| d.chunks.is_some()).collect();
        let trust: Vec<&str> = docs.iter().map(|d| d.trust.as_str()).collect();
        let chunks = ChunkRows::of(&docs)?;
        let write = async {
            tx.execute(UNCOUNT, &[&ids]).await?;
            tx.execute(UNCOUNT_CHUNKS, &[&ids]).await?;
            tx.execute(UPSERT, &[&ids, &titles, &bodies, &metas, &hashes, &vectors, &version, &chunked, &trust])
                .await?;
            tx.execute(DROP_CHUNKS, &[&ids, &chunks.doc_ids, &chunks.indexes, &chunks.hashes]).await?;
            if !chunks.doc_ids.is_empty() {
                tx.execute(
                    UPSERT_CHUNKS,
                    &[
                        &chunks.doc_ids,
                        &chunks.indexes,
                        &chunks.starts,
                        &chunks.ends,
                        &chunks.bodies,
                        &chunks.hashes,
                        &chunks.vectors,
                        &version,
                    ],
                )
                .await?;
            }
            tx.execute(COUNT, &[&ids]).await?;
            tx.execute(COUNT_CHUNKS, &[&ids]).await?;
            tx.commit().await
        };
        write.await.map_err(DbError::from)?;
        Ok(version)
    }

    /// Deletes `ids` (and their chunks) in one transaction; returns how many existed, and the
    /// version (unchanged when none did).
    pub async fn delete(&self, ids: &[String]) -> Result<(u64, i64), DbError> {
        let mut client = self.db.client().await?;
        let tx = client.transaction().await?;
        let version: i64 =
            tx.query_one("UPDATE rcp_state SET version = version + 1 RETURNING version", &[]).await?.get(0);
        tx.execute(UNCOUNT, &[&ids]).await?;
        tx.execute(UNCOUNT_CHUNKS, &[&ids]).await?;
        tx.execute("DELETE FROM rcp_chunks WHERE doc_id = ANY($1)", &[&ids]).await?;
        let deleted = tx.execute("DELETE FROM rcp_documents WHERE id = ANY($1)", &[&ids]).await?;
        if deleted == 0 {
            tx.rollback().await?;
            return Ok((0, version - 1));
        }
        tx.commit().await?;
        Ok((deleted, version))
    }
}

/// The stored content hashes of some documents and of their chunks.
#[derive(Debug, Default)]
struct Stored {
    /// Document id to hash.
    docs: HashMap<String, String>,
    /// (document id, chunk index) to hash.
    chunks: HashMap<(String, i32), String>,
}

impl Stored {
    /// The hashes of `ids`, and of their chunks when `with_chunks` (a batch that chunks), read
    /// on `client` (a connection or a transaction).
    async fn read(
        client: &impl tokio_postgres::GenericClient,
        ids: &[String],
        with_chunks: bool,
    ) -> Result<Self, DbError> {
        let rows = client.query("SELECT id, content_hash FROM rcp_documents WHERE id = ANY($1)", &[&ids]).await?;
        let docs = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        if !with_chunks {
            return Ok(Self { docs, chunks: HashMap::new() });
        }
        let rows =
            client.query("SELECT doc_id, idx, content_hash FROM rcp_chunks WHERE doc_id = ANY($1)", &[&ids]).await?;
        let chunks = rows.iter().map(|r| ((r.get(0), r.get(1)), r.get(2))).collect();
        Ok(Self { docs, chunks })
    }

    /// The passages of `docs` without a vector whose stored text differs (or is absent): what
    /// must be embedded. A chunked document itself is never embedded, its chunks are.
    fn missing(&self, docs: &[NewDoc]) -> Vec<Slot> {
        let mut out = Vec::new();
        for (i, d) in docs.iter().enumerate() {
            match &d.chunks {
                None if d.vector.is_none() && self.docs.get(&d.id) != Some(&d.hash) => {
                    out.push(Slot { doc: i, chunk: None })
                }
                None => {}
                Some(chunks) => {
                    for (j, c) in chunks.iter().enumerate() {
                        let key = (d.id.clone(), i32::try_from(c.chunk.index).unwrap_or(i32::MAX));
                        if c.vector.is_none() && self.chunks.get(&key) != Some(&c.hash) {
                            out.push(Slot { doc: i, chunk: Some(j) });
                        }
                    }
                }
            }
        }
        out
    }
}

/// A passage of a batch: a whole document, or one chunk of a chunked one.
#[derive(Debug, Clone, Copy)]
struct Slot {
    doc: usize,
    chunk: Option<usize>,
}

impl NewDoc {
    /// Whether the write counts on a stored vector (of the document or of one of its chunks).
    fn reuses(&self) -> bool {
        match &self.chunks {
            None => self.vector.is_none(),
            Some(chunks) => chunks.iter().any(|c| c.vector.is_none()),
        }
    }
}

/// The chunks of a batch as the parallel arrays of [`UPSERT_CHUNKS`].
#[derive(Debug, Default)]
struct ChunkRows {
    doc_ids: Vec<String>,
    indexes: Vec<i32>,
    starts: Vec<i32>,
    ends: Vec<i32>,
    bodies: Vec<String>,
    hashes: Vec<String>,
    vectors: Vec<Option<String>>,
}

impl ChunkRows {
    fn of(docs: &[NewDoc]) -> Result<Self, DbError> {
        // PostgreSQL text holds at most 1 GB, so offsets fit an integer column; a larger one
        // is refused rather than wrapped.
        let int = |n: usize| i32::try_from(n).map_err(|_| DbError::Schema(format!("chunk offset {n} exceeds 2^31")));
        let mut out = Self::default();
        for d in docs {
            for c in d.chunks.iter().flatten() {
                out.doc_ids.push(d.id.clone());
                out.indexes.push(int(c.chunk.index)?);
                out.starts.push(int(c.chunk.start)?);
                out.ends.push(int(c.chunk.end)?);
                out.bodies.push(c.body.clone());
                out.hashes.push(c.hash.clone());
                out.vectors.push(c.vector.as_deref().map(vector_literal));
            }
        }
        Ok(out)
    }
}

/// Takes the given documents (`$1` ids) out of the collection statistics and the postings (a
/// chunked document only out of `chunked_docs`: its chunks are [`UNCOUNT_CHUNKS`]'s).
const UNCOUNT: &str = "
WITH old AS (SELECT tsv, doc_len FROM rcp_documents WHERE id = ANY($1) AND NOT chunked),
     terms AS (SELECT l AS lexeme, count(*) AS n FROM old, unnest(tsvector_to_array(old.tsv)) AS l GROUP BY l),
     dec AS (UPDATE rcp_terms t SET df = t.df - terms.n FROM terms WHERE t.lexeme = terms.lexeme),
     unpost AS (DELETE FROM rcp_postings WHERE doc_id = ANY($1))
UPDATE rcp_state SET doc_count = doc_count - (SELECT count(*) FROM old),
                     total_len = total_len - (SELECT coalesce(sum(doc_len), 0) FROM old),
                     chunked_docs = chunked_docs - (SELECT count(*) FROM rcp_documents WHERE id = ANY($1) AND chunked)";

/// Adds the given documents (`$1` ids) to the collection statistics and the postings (a
/// chunked document only to `chunked_docs`).
const COUNT: &str = "
WITH new AS (SELECT id, tsv, doc_len FROM rcp_documents WHERE id = ANY($1) AND NOT chunked),
     terms AS (SELECT l AS lexeme, count(*) AS n FROM new, unnest(tsvector_to_array(new.tsv)) AS l GROUP BY l),
     inc AS (INSERT INTO rcp_terms (lexeme, df) SELECT lexeme, n FROM terms
             ON CONFLICT (lexeme) DO UPDATE SET df = rcp_terms.df + excluded.df),
     post AS (INSERT INTO rcp_postings (lexeme, doc_id, tf, doc_len)
              SELECT x.lexeme, new.id, cardinality(x.positions), new.doc_len FROM new CROSS JOIN LATERAL unnest(new.tsv) AS x)
UPDATE rcp_state SET doc_count = doc_count + (SELECT count(*) FROM new),
                     total_len = total_len + (SELECT coalesce(sum(doc_len), 0) FROM new),
                     chunked_docs = chunked_docs + (SELECT count(*) FROM rcp_documents WHERE id = ANY($1) AND chunked)";

/// Takes the chunks of the given documents (`$1` ids) out of the collection statistics and the
/// chunk postings.
const UNCOUNT_CHUNKS: &str = "
WITH old AS (SELECT tsv, doc_len FROM rcp_chunks WHERE doc_id = ANY($1)),
     terms AS (SELECT l AS lexeme, count(*) AS n FROM old, unnest(tsvector_to_array(old.tsv)) AS l GROUP BY l),
     dec AS (UPDATE rcp_terms t SET df = t.df - terms.n FROM terms WHERE t.lexeme = terms.lexeme),
     unpost AS (DELETE FROM rcp_chunk_postings WHERE doc_id = ANY($1))
UPDATE rcp_state SET chunk_count = chunk_count - (SELECT count(*) FROM old),
                     chunk_len = chunk_len - (SELECT coalesce(sum(doc_len), 0) FROM old)";

/// Adds the chunks of the given documents (`$1` ids) to the collection statistics and the
/// chunk postings.
const COUNT_CHUNKS: &str = "
WITH new AS (SELECT doc_id, idx, tsv, doc_len FROM rcp_chunks WHERE doc_id = ANY($1)),
     terms AS (SELECT l AS lexeme, count(*) AS n FROM new, unnest(tsvector_to_array(new.tsv)) AS l GROUP BY l),
     inc AS (INSERT INTO rcp_terms (lexeme, df) SELECT lexeme, n FROM terms
             ON CONFLICT (lexeme) DO UPDATE SET df = rcp_terms.df + excluded.df),
     post AS (INSERT INTO rcp_chunk_postings (lexeme, doc_id, chunk, tf, doc_len)
              SELECT x.lexeme, new.doc_id, new.idx, cardinality(x.positions), new.doc_len
              FROM new CROSS JOIN LATERAL unnest(new.tsv) AS x)
UPDATE rcp_state SET chunk_count = chunk_count + (SELECT count(*) FROM new),
                     chunk_len = chunk_len + (SELECT coalesce(sum(doc_len), 0) FROM new)";

/// Upserts rows from parallel arrays; a NULL vector keeps the stored one, a chunked document
/// (`$8`) has none. A write sets the document's trust level (`$9`) whether or not its text
/// changed.
const UPSERT: &str = "
INSERT INTO rcp_documents AS d (id, title, body, metadata, content_hash, embedding, version, chunked, trust)
SELECT u.id, u.title, u.body, u.metadata, u.hash, CASE WHEN u.chunked THEN NULL ELSE coalesce(u.vec::vector, old.embedding) END, $7, u.chunked, u.trust
FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::text[], $6::text[], $8::bool[], $9::text[])
     AS u(id, title, body, metadata, hash, vec, chunked, trust)
LEFT JOIN rcp_documents old ON old.id = u.id
ON CONFLICT (id) DO UPDATE SET title = excluded.title, body = excluded.body, metadata = excluded.metadata,
    content_hash = excluded.content_hash, embedding = excluded.embedding, version = excluded.version,
    chunked = excluded.chunked, trust = excluded.trust, updated_at = now()";

/// Deletes the stored chunks of the given documents (`$1` ids) that the batch does not write
/// again unchanged (`$2..$4`: document id, index, hash of each new chunk): what is left keeps
/// its embedding through [`UPSERT_CHUNKS`].
const DROP_CHUNKS: &str = "
DELETE FROM rcp_chunks c WHERE c.doc_id = ANY($1) AND NOT EXISTS (
    SELECT 1 FROM unnest($2::text[], $3::int4[], $4::text[]) AS u(doc_id, idx, hash)
    WHERE u.doc_id = c.doc_id AND u.idx = c.idx AND u.hash = c.content_hash)";

/// Upserts chunks from parallel arrays (their documents written first); a NULL vector keeps
/// the stored one of the same chunk. The tsvector is the document's title and the chunk's text.
const UPSERT_CHUNKS: &str = "
INSERT INTO rcp_chunks AS c (doc_id, idx, start_byte, end_byte, body, content_hash, embedding, tsv, doc_len, version)
SELECT u.doc_id, u.idx, u.start_byte, u.end_byte, u.body, u.hash, coalesce(u.vec::vector, old.embedding),
       rcp_doc_tsv(d.title, u.body), rcp_tsv_len(rcp_doc_tsv(d.title, u.body)), $8
FROM unnest($1::text[], $2::int4[], $3::int4[], $4::int4[], $5::text[], $6::text[], $7::text[])
     AS u(doc_id, idx, start_byte, end_byte, body, hash, vec)
JOIN rcp_documents d ON d.id = u.doc_id
LEFT JOIN rcp_chunks old ON old.doc_id = u.doc_id AND old.idx = u.idx
ON CONFLICT (doc_id, idx) DO UPDATE SET start_byte = excluded.start_byte, end_byte = excluded.end_byte,
    body = excluded.body, content_hash = excluded.content_hash, embedding = excluded.embedding,
    tsv = excluded.tsv, doc_len = excluded.doc_len, version = excluded.version";

/// Embeds the passages `todo` of `docs` and stores the vectors on them.
async fn fill<X, E, F>(docs: &mut [NewDoc], todo: &[Slot], embed: &E) -> Result<(), X>
where
    E: Fn(Vec<String>) -> F,
    F: Future<Output = Result<Vec<Vec<f32>>, X>>,
{
    if todo.is_empty() {
        return Ok(());
    }
    let passages = todo
        .iter()
        .map(|s| {
            let d = &docs[s.doc];
            match (s.chunk, &d.chunks) {
                (Some(j), Some(chunks)) => passage(d.title.as_deref(), &chunks[j].body),
                _ => d.passage(),
            }
        })
        .collect();
    let vectors = embed(passages).await?;
    for (s, v) in todo.iter().zip(vectors) {
        let d = &mut docs[s.doc];
        match (s.chunk, &mut d.chunks) {
            (Some(j), Some(chunks)) => chunks[j].vector = Some(v),
            _ => d.vector = Some(v),
        }
    }
    Ok(())
}
