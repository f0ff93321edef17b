//! The index in PostgreSQL: one statement per search (sparse, dense, or both lists for
//! hybrid), and writes as one transaction each.
//!
//! Sparse ranking is Okapi BM25 (k1 1.2, b 0.75) computed in SQL from an inverted index:
//! `rcp_postings` holds (lexeme, document, tf, length) for every lexeme of every document's
//! `tsvector`, so a query reads only its own terms' postings; idf comes from `rcp_terms` and the
//! average length from `rcp_state`. All three are maintained by every write, in its transaction. Dense ranking is cosine similarity through pgvector's HNSW index
//! (`hnsw.ef_search` per query), or an exact scan when a filter is present, so a selective
//! filter never starves the result list.
//!
//! Every write first bumps `rcp_state.version`: writers from any number of processes serialise
//! on that row, versions are gap-free, and a version is visible exactly when its rows are.

use std::collections::{BTreeMap, HashMap};

use rcp_wire::filter::{FieldType, Filter};
use serde_json::Value;
use tokio_postgres::Row;

use crate::db::{Database, DbError};
use crate::filter::{Params, compile};
use crate::input::MAX_BIND_PARAMS;

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
}

/// A ranked row.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Document id.
    pub id: String,
    /// Title, if any.
    pub title: Option<String>,
    /// Body text.
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
    /// The embedding of title and body.
    pub vector: Option<Vec<f32>>,
}

impl NewDoc {
    /// A document to write (its vector is computed by [`Store::put`]).
    pub fn new(id: String, title: Option<String>, body: String, metadata: Value) -> Self {
        let hash = content_hash(title.as_deref(), &body);
        Self { id, title, body, metadata, hash, vector: None }
    }

    /// The text embedded for it: title and body, as `rcp-dense` does.
    pub fn passage(&self) -> String {
        match &self.title {
            Some(t) if !t.is_empty() => format!("{t} {}", self.body),
            _ => self.body.clone(),
        }
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

    /// `(documents, version)` now.
    pub async fn stats(&self) -> Result<(i64, i64), DbError> {
        let client = self.read.client().await?;
        let row = client.query_one("SELECT doc_count, version FROM rcp_state", &[]).await?;
        Ok((row.get(0), row.get(1)))
    }

    /// Runs one search in one statement (plus a pipelined `set_config` for the beam width).
    pub async fn search(&self, s: &Search<'_>) -> Result<Ranked, DbError> {
        let mut p = Params::new();
        let where_ = match s.filter {
            Some(f) => compile(f, &self.fields, &mut p),
            None => "TRUE".to_owned(),
        };
        let limit = p.push(s.limit as i64);
        let text = p.push(s.text.to_owned());
        let vector = s.vector.map(|v| p.push(vector_literal(v)));
        let with_vec = if s.with_vectors { "d.embedding::text" } else { "NULL::text" };
        // HNSW returns at most ef_search rows, and a filter applied after it can leave too few:
        // filtered or very deep searches scan exactly (`+ 0` keeps the planner off the index).
        let exact = s.filter.is_some() || s.limit > MAX_EF_SEARCH;
        let order = |v: &str| {
            if exact { format!("(d.embedding <=> {v}::vector) + 0") } else { format!("d.embedding <=> {v}::vector") }
        };
        let cosine = |v: &Option<String>| match v {
            Some(v) => format!("1 - (d.embedding <=> {v}::vector)"),
            None => "NULL::float8".to_owned(),
        };
        // BM25 from the postings of the query's own lexemes only; a filter joins the documents.
        // The lexeme list is repeated on the postings themselves: joined only through `q`, the
        // planner cannot tell how few lexemes there are and merge-joins the whole postings
        // index (59 ms instead of 6.6 ms for a Cranfield query at 1,400 documents).
        let filter_join = if s.filter.is_some() {
            format!("JOIN rcp_documents d ON d.id = p.doc_id AND {where_}")
        } else {
            String::new()
        };
        let sparse_cte = format!(
            "st AS (SELECT doc_count::float8 AS n, greatest(total_len::float8 / greatest(doc_count, 1), 1.0) AS avgdl FROM rcp_state),
             q AS (SELECT t.lexeme, ln(1 + (st.n - t.df + 0.5) / (t.df + 0.5)) AS idf
                   FROM rcp_terms t CROSS JOIN st
                   WHERE t.lexeme = ANY (tsvector_to_array(to_tsvector('english'::regconfig, {text}))) AND t.df > 0),
             sparse AS (SELECT p.doc_id AS id,
                               sum(q.idf * p.tf * ({k1} + 1) / (p.tf + {k1} * (1 - {b} + {b} * p.doc_len / st.avgdl))) AS score
                        FROM rcp_postings p JOIN q ON q.lexeme = p.lexeme CROSS JOIN st {filter_join}
                        WHERE p.lexeme = ANY (tsvector_to_array(to_tsvector('english'::regconfig, {text})))
                        GROUP BY p.doc_id ORDER BY score DESC, p.doc_id LIMIT {limit})",
            k1 = BM25_K1,
            b = BM25_B,
        );
        let sparse_select = format!(
            "SELECT 's' AS list, d.id, d.title, d.body, d.metadata, s.score, {cos}, {with_vec}, (SELECT version FROM rcp_state)
             FROM sparse s JOIN rcp_documents d ON d.id = s.id ORDER BY s.score DESC, s.id",
            cos = cosine(&vector),
        );
        let dense_select = |v: &str| {
            format!(
                "SELECT 'd' AS list, d.id, d.title, d.body, d.metadata, NULL::float8, 1 - (d.embedding <=> {v}::vector), {with_vec},
                        (SELECT version FROM rcp_state)
                 FROM rcp_documents d WHERE {where_} ORDER BY {order} LIMIT {limit}",
                order = order(v)
            )
        };
        let sql = match (s.lists, &vector) {
            (Lists::Sparse, _) => format!("WITH {sparse_cte} {sparse_select}"),
            (Lists::Dense, Some(v)) => dense_select(v),
            (Lists::Both, Some(v)) => format!("WITH {sparse_cte} ({sparse_select}) UNION ALL ({})", dense_select(v)),
            (_, None) => return Err(DbError::Schema("a dense search needs a query vector".into())),
        };
        if p.len() > MAX_BIND_PARAMS {
            return Err(DbError::TooManyParams(p.len()));
        }
        let client = self.read.client().await?;
        let ef = s.ef_search.max(s.limit).clamp(1, MAX_EF_SEARCH).to_string();
        let rows = if s.lists == Lists::Sparse || exact {
            client.query_typed(&sql, &p.typed_refs()).await?
        } else {
            // One round trip: the beam width and the search are pipelined on one connection.
            let set_params = [(&ef as &(dyn tokio_postgres::types::ToSql + Sync), tokio_postgres::types::Type::TEXT)];
            let set = client.query_typed("SELECT set_config('hnsw.ef_search', $1, false)", &set_params);
            let refs = p.typed_refs();
            let search = client.query_typed(&sql, &refs);
            let (set, rows) = tokio::join!(set, search);
            set?;
            rows?
        };
        let mut out = Ranked { exact: exact && s.lists != Lists::Sparse, ..Ranked::default() };
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

    /// The stored content hash of each of `ids` that exists.
    pub async fn hashes(&self, ids: &[String]) -> Result<HashMap<String, String>, DbError> {
        let client = self.db.client().await?;
        let rows = client.query("SELECT id, content_hash FROM rcp_documents WHERE id = ANY($1)", &[&ids]).await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Upserts `docs` (their `vector`s unset) in one transaction and returns the new version
    /// once committed: acknowledged means committed.
    ///
    /// Only new or changed text (by [`content_hash`]) is passed to `embed` (passages in
    /// document order, one vector each); an unchanged document keeps its stored vector. If
    /// another writer changes or removes such a document before this transaction takes the
    /// writers' lock, it is embedded then, under the lock (rare).
    pub async fn put<X, E, F>(&self, mut docs: Vec<NewDoc>, embed: E) -> Result<i64, X>
    where
        X: From<DbError>,
        E: Fn(Vec<String>) -> F,
        F: Future<Output = Result<Vec<Vec<f32>>, X>>,
    {
        let ids: Vec<String> = docs.iter().map(|d| d.id.clone()).collect();
        let stored = self.hashes(&ids).await?;
        let todo: Vec<usize> = (0..docs.len()).filter(|&i| stored.get(&docs[i].id) != Some(&docs[i].hash)).collect();
        fill(&mut docs, &todo, &embed).await?;
        let mut client = self.db.client().await?;
        let tx = client.transaction().await.map_err(DbError::from)?;
        let version: i64 = tx
            .query_one("UPDATE rcp_state SET version = version + 1 RETURNING version", &[])
            .await
            .map_err(DbError::from)?
            .get(0);
        let reused: Vec<String> = docs.iter().filter(|d| d.vector.is_none()).map(|d| d.id.clone()).collect();
        if !reused.is_empty() {
            let rows = tx
                .query("SELECT id, content_hash FROM rcp_documents WHERE id = ANY($1)", &[&reused])
                .await
                .map_err(DbError::from)?;
            let current: HashMap<String, String> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
            let stale: Vec<usize> = (0..docs.len())
                .filter(|&i| docs[i].vector.is_none() && current.get(&docs[i].id) != Some(&docs[i].hash))
                .collect();
            fill(&mut docs, &stale, &embed).await?;
        }
        let titles: Vec<Option<String>> = docs.iter().map(|d| d.title.clone()).collect();
        let bodies: Vec<String> = docs.iter().map(|d| d.body.clone()).collect();
        let metas: Vec<Value> = docs.iter().map(|d| d.metadata.clone()).collect();
        let hashes: Vec<String> = docs.iter().map(|d| d.hash.clone()).collect();
        let vectors: Vec<Option<String>> = docs.iter().map(|d| d.vector.as_deref().map(vector_literal)).collect();
        let write = async {
            tx.execute(UNCOUNT, &[&ids]).await?;
            tx.execute(UPSERT, &[&ids, &titles, &bodies, &metas, &hashes, &vectors, &version]).await?;
            tx.execute(COUNT, &[&ids]).await?;
            tx.commit().await
        };
        write.await.map_err(DbError::from)?;
        Ok(version)
    }

    /// Deletes `ids` in one transaction; returns how many existed, and the version (unchanged
    /// when none did).
    pub async fn delete(&self, ids: &[String]) -> Result<(u64, i64), DbError> {
        let mut client = self.db.client().await?;
        let tx = client.transaction().await?;
        let version: i64 =
            tx.query_one("UPDATE rcp_state SET version = version + 1 RETURNING version", &[]).await?.get(0);
        tx.execute(UNCOUNT, &[&ids]).await?;
        let deleted = tx.execute("DELETE FROM rcp_documents WHERE id = ANY($1)", &[&ids]).await?;
        if deleted == 0 {
            tx.rollback().await?;
            return Ok((0, version - 1));
        }
        tx.commit().await?;
        Ok((deleted, version))
    }
}

/// Takes the given documents (`$1` ids) out of the collection statistics and the postings.
const UNCOUNT: &str = "
WITH old AS (SELECT tsv, doc_len FROM rcp_documents WHERE id = ANY($1)),
     terms AS (SELECT l AS lexeme, count(*) AS n FROM old, unnest(tsvector_to_array(old.tsv)) AS l GROUP BY l),
     dec AS (UPDATE rcp_terms t SET df = t.df - terms.n FROM terms WHERE t.lexeme = terms.lexeme),
     unpost AS (DELETE FROM rcp_postings WHERE doc_id = ANY($1))
UPDATE rcp_state SET doc_count = doc_count - (SELECT count(*) FROM old),
                     total_len = total_len - (SELECT coalesce(sum(doc_len), 0) FROM old)";

/// Adds the given documents (`$1` ids) to the collection statistics and the postings.
const COUNT: &str = "
WITH new AS (SELECT id, tsv, doc_len FROM rcp_documents WHERE id = ANY($1)),
     terms AS (SELECT l AS lexeme, count(*) AS n FROM new, unnest(tsvector_to_array(new.tsv)) AS l GROUP BY l),
     inc AS (INSERT INTO rcp_terms (lexeme, df) SELECT lexeme, n FROM terms
             ON CONFLICT (lexeme) DO UPDATE SET df = rcp_terms.df + excluded.df),
     post AS (INSERT INTO rcp_postings (lexeme, doc_id, tf, doc_len)
              SELECT x.lexeme, new.id, cardinality(x.positions), new.doc_len FROM new CROSS JOIN LATERAL unnest(new.tsv) AS x)
UPDATE rcp_state SET doc_count = doc_count + (SELECT count(*) FROM new),
                     total_len = total_len + (SELECT coalesce(sum(doc_len), 0) FROM new)";

/// Upserts rows from parallel arrays; a NULL vector keeps the stored one.
const UPSERT: &str = "
INSERT INTO rcp_documents AS d (id, title, body, metadata, content_hash, embedding, version)
SELECT u.id, u.title, u.body, u.metadata, u.hash, coalesce(u.vec::vector, old.embedding), $7
FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::text[], $6::text[]) AS u(id, title, body, metadata, hash, vec)
LEFT JOIN rcp_documents old ON old.id = u.id
ON CONFLICT (id) DO UPDATE SET title = excluded.title, body = excluded.body, metadata = excluded.metadata,
    content_hash = excluded.content_hash, embedding = excluded.embedding, version = excluded.version, updated_at = now()";

/// Embeds the passages of `docs[todo]` and stores the vectors on them.
async fn fill<X, E, F>(docs: &mut [NewDoc], todo: &[usize], embed: &E) -> Result<(), X>
where
    E: Fn(Vec<String>) -> F,
    F: Future<Output = Result<Vec<Vec<f32>>, X>>,
{
    if todo.is_empty() {
        return Ok(());
    }
    let vectors = embed(todo.iter().map(|&i| docs[i].passage()).collect()).await?;
    for (&i, v) in todo.iter().zip(vectors) {
        docs[i].vector = Some(v);
    }
    Ok(())
}

fn decode(row: &Row) -> Result<(String, Found, i64), DbError> {
    let list: String = row.try_get(0)?;
    let metadata = match row.try_get::<_, Value>(4)? {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    let vector: Option<String> = row.try_get(7)?;
    let found = Found {
        id: row.try_get(1)?,
        title: row.try_get(2)?,
        body: row.try_get(3)?,
        metadata,
        bm25: row.try_get(5)?,
        cosine: row.try_get(6)?,
        vector: vector.as_deref().and_then(parse_vector),
    };
    Ok((list, found, row.try_get(8)?))
}
