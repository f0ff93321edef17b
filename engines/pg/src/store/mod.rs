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

use std::collections::BTreeMap;

use rcp_corpus::chunking::{self, Chunk, ChunkPolicy};
use rcp_corpus::trust::TrustLevel;
use rcp_wire::filter::FieldType;
use serde_json::Value;

use crate::db::{Database, DbError};
use crate::input::MAX_BIND_PARAMS;
use crate::query::{Lists, Ranked, Search};

mod writes;

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
    /// Its provenance (`hit.trust.level`), stored with it.
    pub trust: TrustLevel,
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
    /// A document to write whole (its vector is computed by [`Store::put`]), `untrusted`
    /// unless [`Self::with_trust`] says otherwise.
    pub fn new(id: String, title: Option<String>, body: String, metadata: Value) -> Self {
        let hash = content_hash(title.as_deref(), &body);
        Self { id, title, body, metadata, hash, vector: None, chunks: None, trust: TrustLevel::Untrusted }
    }

    /// The document with its provenance set to `trust`.
    pub fn with_trust(mut self, trust: TrustLevel) -> Self {
        self.trust = trust;
        self
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
            let (list, found, version) = crate::query::decode(row)?;
            out.version = version;
            if list == "s" { out.sparse.push(found) } else { out.dense.push(found) }
        }
        Ok(out)
    }
}
