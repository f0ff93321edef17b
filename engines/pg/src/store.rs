//! The index in PostgreSQL: one statement per search (sparse, dense, or both lists for
//! hybrid, built in [`crate::query`]), and writes as one transaction each.
//!
//! Sparse ranking is Okapi BM25 (k1 1.2, b 0.75) computed in SQL from an inverted index:
//! `rcp_postings` holds (lexeme, document, tf, length) for every lexeme of every document's
//! `tsvector`, so a query reads only its own terms' postings; idf comes from `rcp_terms` and the
//! average length from `rcp_state`. All three are maintained by every write, in its
//! transaction. Dense ranking is cosine similarity through pgvector's HNSW index
//! (`hnsw.ef_search` per query), or an exact scan when a filter is present, so a selective
//! filter never starves the result list.
//!
//! A document added with `chunk: true` (§7.10) is stored whole in `rcp_documents` (marked
//! `chunked`, not searched there: no embedding, no postings) and as its chunks in `rcp_chunks`
//! ([`rcp_corpus::chunking`]), each with its byte offsets, text, tsvector, postings and
//! embedding, written in the document's transaction; re-adding the document replaces its
//! chunks, deleting it removes them.
//!
//! Every write first bumps `rcp_state.version`: writers from any number of processes serialise
//! on that row, versions are gap-free, and a version is visible exactly when its rows are.

use std::collections::{BTreeMap, HashMap};

use rcp_corpus::chunking::{self, Chunk, ChunkPolicy};
use rcp_wire::filter::{FieldType, Filter};
use serde_json::Value;
use tokio_postgres::Row;

use crate::db::{Database, DbError};
use crate::input::MAX_BIND_PARAMS;
pub use crate::query::Unit;

/// BM25 term-frequency saturation.
pub const BM25_K1: f64 = 1.2;
/// BM25 length normalisation.
pub const BM25_B: f64 = 0.75;
/// pgvector's largest `hnsw.ef_search`.
pub const MAX_EF_SEARCH: usize = 1000;

/// Which ranked lists a search needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lists {
    /// BM25 only.
    Sparse,
    /// Cosine only.
    Dense,
    /// Both, fused by the caller.
    Both,
}

/// One search.
#[derive(Debug, Clone)]
pub struct Search<'a> {
    /// The query text (sparse).
    pub text: &'a str,
    /// The query vector (dense, and the cosine of every sparse row in hybrid).
    pub vector: Option<&'a [f32]>,
    /// The lists wanted.
    pub lists: Lists,
    /// The filter.
    pub filter: Option<&'a Filter>,
    /// Rows per list.
    pub limit: usize,
    /// HNSW beam width (raised to `limit`, capped at [`MAX_EF_SEARCH`]).
    pub ef_search: usize,
    /// Whether to return `vector` (as stored) with each row.
    pub with_vectors: bool,
    /// What a row is: a document, or a chunk (§7.7.2 `unit`).
    pub unit: Unit,
}

/// A ranked row: a document, or one chunk of a chunked document.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Document id.
    pub id: String,
    /// The chunk, for a chunk row (only in [`Unit::Chunk`] searches).
    pub chunk: Option<Chunk>,
    /// Title, if any.
    pub title: Option<String>,
    /// Body text: the chunk's (exactly the document's text at its offsets) for a chunk row.
    pub body: String,
    /// Metadata object.
    pub metadata: serde_json::Map<String, Value>,
    /// BM25 score (sparse list).
    pub bm25: Option<f64>,
    /// Cosine similarity to the query vector (dense list; sparse rows in hybrid too).
    pub cosine: Option<f64>,
    /// The stored vector, when asked for.
    pub vector: Option<Vec<f32>>,
}

impl Found {
    /// The row's hit id: the document id, or `{docId}#{index}` for a chunk (as rcp-bm25 names
    /// its chunk hits).
    pub fn hit_id(&self) -> String {
        match &self.chunk {
            Some(c) => format!("{}#{}", self.id, c.index),
            None => self.id.clone(),
        }
    }

    /// A key no two rows of one search share (ids hold no U+0000: [`crate::input`]), for
    /// matching a row across the sparse and dense lists.
    pub fn key(&self) -> String {
        match &self.chunk {
            Some(c) => format!("{}\0{}", self.id, c.index),
            None => self.id.clone(),
        }
    }
}

/// What a search returns: each list in rank order, and the version it saw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ranked {
    /// The BM25 list.
    pub sparse: Vec<Found>,
    /// The cosine list.
    pub dense: Vec<Found>,
    /// `rcp_state.version` in the statement's snapshot.
    pub version: i64,
    /// Whether the dense list came from an exact scan rather than the HNSW index.
    pub exact: bool,
}

/// A document to upsert, with its vector (`None`: unchanged text, keep the stored one).
#[derive(Debug, Clone, PartialEq)]
pub struct NewDoc {
    /// Id.
    pub id: String,
    /// Title.
    pub title: Option<String>,
    /// Body.
    pub body: String,
    /// Metadata object.
    pub metadata: Value,
    /// [`content_hash`] of title and body.
    pub hash: String,
    /// The embedding of title and body (never set on a chunked document: its chunks have one
    /// each).
    pub vector: Option<Vec<f32>>,
    /// The chunks, for a document added with `chunk: true`; `None` for one added whole.
    pub chunks: Option<Vec<NewChunk>>,
}

/// One chunk of a [`NewDoc`] to write.
#[derive(Debug, Clone, PartialEq)]
pub struct NewChunk {
    /// Position and byte range in the document's text.
    pub chunk: Chunk,
    /// The chunk's text: the document's text at its offsets.
    pub body: String,
    /// [`content_hash`] of the document's title and the chunk's text.
    pub hash: String,
    /// The embedding of the document's title and the chunk's text.
    pub vector: Option<Vec<f32>>,
}

/// Prefixed to a chunked document's [`content_hash`], so adding the same text whole again
/// embeds it (a chunked document stores no vector of its own).
const CHUNKED_HASH: &str = "chunked:";

impl NewDoc {
    /// A document to write whole (its vector is computed by [`Store::put`]).
    pub fn new(id: String, title: Option<String>, body: String, metadata: Value) -> Self {
        let hash = content_hash(title.as_deref(), &body);
        Self { id, title, body, metadata, hash, vector: None, chunks: None }
    }

    /// The document to write as its chunks under `policy` instead (§7.10 `chunk: true`).
    pub fn chunked(mut self, policy: ChunkPolicy) -> Self {
        let chunks = chunking::chunk(&self.body, policy)
            .into_iter()
            .map(|c| {
                let body = self.body[c.start..c.end].to_owned();
                let hash = content_hash(self.title.as_deref(), &body);
                NewChunk { chunk: c, body, hash, vector: None }
            })
            .collect();
        self.hash = format!("{CHUNKED_HASH}{}", self.hash);
        self.chunks = Some(chunks);
        self
    }

    /// The text embedded for it: title and body, as `rcp-dense` does.
    pub fn passage(&self) -> String {
        passage(self.title.as_deref(), &self.body)
    }
}

/// The text embedded for a title and a body (a document's or a chunk's).
fn passage(title: Option<&str>, body: &str) -> String {
    match title {
        Some(t) if !t.is_empty() => format!("{t} {body}"),
        _ => body.to_owned(),
    }
}

/// The sha256 of a title and body: equal hashes mean the embedding can be reused.
pub fn content_hash(title: Option<&str>, body: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(title.unwrap_or("").as_bytes());
    h.update([0]);
    h.update(body.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A vector in pgvector's text form (`[0.1,0.2,...]`).
pub fn vector_literal(v: &[f32]) -> String {
    let mut s = String::with_capacity(v.len() * 12 + 2);
    s.push('[');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&x.to_string());
    }
    s.push(']');
    s
}

fn parse_vector(text: &str) -> Option<Vec<f32>> {
    serde_json::from_str(text).ok()
}

/// The index: documents, terms and state in one database.
#[derive(Debug, Clone)]
pub struct Store {
    db: Database,
    read: Database,
    fields: BTreeMap<String, FieldType>,
}

impl Store {
    /// A store over `db` whose filterable fields are `fields`.
    pub fn new(db: Database, fields: BTreeMap<String, FieldType>) -> Self {
        Self { read: db.clone(), db, fields }
    }

    /// Searches go to `read` (a streaming replica of the primary) instead of the primary.
    /// Writes, and the content-hash lookups that prepare them, stay on the primary.
    pub fn with_read_replica(mut self, read: Database) -> Self {
        self.read = read;
        self
    }

    /// The primary database.
    pub fn db(&self) -> &Database {
        &self.db
    }

    /// The database searches read: the read replica when one is configured, else the primary.
    pub fn read_db(&self) -> &Database {
        &self.read
    }

    /// The filterable fields (§8).
    pub fn fields(&self) -> &BTreeMap<String, FieldType> {
        &self.fields
    }

    /// The declared fields in the database (`rcp_fields`).
    pub async fn load_fields(db: &Database) -> Result<BTreeMap<String, FieldType>, DbError> {
        let client = db.client().await?;
        let rows = client.query("SELECT name, type FROM rcp_fields ORDER BY name", &[]).await?;
        Ok(rows.iter().map(|r| (r.get::<_, String>(0), FieldType::parse(r.get::<_, &str>(1)))).collect())
    }

    /// Declares (or re-types) filterable fields.
    pub async fn declare_fields(db: &Database, fields: &BTreeMap<String, FieldType>) -> Result<(), DbError> {
        let client = db.client().await?;
        for (name, ty) in fields {
            client
                .execute(
                    "INSERT INTO rcp_fields (name, type) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET type = excluded.type",
                    &[name, &ty.as_str()],
                )
                .await?;
        }
        Ok(())
    }

    /// `(documents, version)` now (documents added whole or chunked, not chunks).
    pub async fn stats(&self) -> Result<(i64, i64), DbError> {
        let client = self.read.client().await?;
        let row = client.query_one("SELECT doc_count + chunked_docs, version FROM rcp_state", &[]).await?;
        Ok((row.get(0), row.get(1)))
    }

    /// Runs one search in one statement (plus a pipelined `set_config` for the beam width).
    pub async fn search(&self, s: &Search<'_>) -> Result<Ranked, DbError> {
        let st = crate::query::statement(s, &self.fields)
            .ok_or_else(|| DbError::Schema("a dense search needs a query vector".into()))?;
        if st.params.len() > MAX_BIND_PARAMS {
            return Err(DbError::TooManyParams(st.params.len()));
        }
        let client = self.read.client().await?;
        let ef = st.ef_search.to_string();
        let rows = if s.lists == Lists::Sparse || st.exact {
            client.query_typed(&st.sql, &st.params.typed_refs()).await?
        } else {
            // One round trip: the beam width and the search are pipelined on one connection.
            let set_params = [(&ef as &(dyn tokio_postgres::types::ToSql + Sync), tokio_postgres::types::Type::TEXT)];
            let set = client.query_typed("SELECT set_config('hnsw.ef_search', $1, false)", &set_params);
            let refs = st.params.typed_refs();
            let search = client.query_typed(&st.sql, &refs);
            let (set, rows) = tokio::join!(set, search);
            set?;
            rows?
        };
        let mut out = Ranked { exact: st.exact, ..Ranked::default() };
        if rows.is_empty() {
            out.version = client.query_one("SELECT version FROM rcp_state", &[]).await?.get(0);
        }
        for row in &rows {
            let (list, found, version) = decode(row)?;
            out.version = version;
            if list == "s" { out.sparse.push(found) } else { out.dense.push(found) }
        }
        Ok(out)
    }

    /// The stored content hash of each of `ids` that exists (a chunked document's is marked
    /// as such, so it never matches the same text added whole).
    pub async fn hashes(&self, ids: &[String]) -> Result<HashMap<String, String>, DbError> {
        let client = self.db.client().await?;
        Ok(Stored::read(&**client, ids, false).await?.docs)
    }

    /// Upserts `docs` (their `vector`s unset) in one transaction and returns the new version
    /// once committed: acknowledged means committed.
    ///
    /// Only new or changed text (by [`content_hash`]) is passed to `embed` (passages in
    /// document order, a chunked document's chunks in their order, one vector each); an
    /// unchanged document, or an unchanged chunk at the same position, keeps its stored vector.
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
        let chunks = ChunkRows::of(&docs)?;
        let write = async {
            tx.execute(UNCOUNT, &[&ids]).await?;
            tx.execute(UNCOUNT_CHUNKS, &[&ids]).await?;
            tx.execute(UPSERT, &[&ids, &titles, &bodies, &metas, &hashes, &vectors, &version, &chunked]).await?;
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
/// (`$8`) has none.
const UPSERT: &str = "
INSERT INTO rcp_documents AS d (id, title, body, metadata, content_hash, embedding, version, chunked)
SELECT u.id, u.title, u.body, u.metadata, u.hash, CASE WHEN u.chunked THEN NULL ELSE coalesce(u.vec::vector, old.embedding) END, $7, u.chunked
FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::text[], $6::text[], $8::bool[])
     AS u(id, title, body, metadata, hash, vec, chunked)
LEFT JOIN rcp_documents old ON old.id = u.id
ON CONFLICT (id) DO UPDATE SET title = excluded.title, body = excluded.body, metadata = excluded.metadata,
    content_hash = excluded.content_hash, embedding = excluded.embedding, version = excluded.version,
    chunked = excluded.chunked, updated_at = now()";

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

fn decode(row: &Row) -> Result<(String, Found, i64), DbError> {
    let list: String = row.try_get(0)?;
    let offset = |i: usize| -> Result<Option<usize>, DbError> {
        let n: Option<i32> = row.try_get(i)?;
        n.map(|n| usize::try_from(n).map_err(|_| DbError::Schema(format!("negative chunk offset {n}")))).transpose()
    };
    let chunk = match (offset(2)?, offset(3)?, offset(4)?) {
        (Some(index), Some(start), Some(end)) => Some(Chunk { index, start, end }),
        _ => None,
    };
    let metadata = match row.try_get::<_, Value>(7)? {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    let vector: Option<String> = row.try_get(10)?;
    let found = Found {
        id: row.try_get(1)?,
        chunk,
        title: row.try_get(5)?,
        body: row.try_get(6)?,
        metadata,
        bm25: row.try_get(8)?,
        cosine: row.try_get(9)?,
        vector: vector.as_deref().and_then(parse_vector),
    };
    Ok((list, found, row.try_get(11)?))
}
