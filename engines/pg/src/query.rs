//! A search: what is asked ([`Search`]), the one SQL statement per `retrieve` computing the
//! sparse list, the dense list, or both (hybrid), over whole documents and chunks in the
//! requested unit (§7.7.2), and the rows it returns ([`Found`], [`Ranked`]). [`crate::store`]
//! runs it.
//!
//! The rows a search ranks are the searched ones: whole documents (`rcp_documents` rows not
//! `chunked`) and chunks (`rcp_chunks`). With [`Unit::Chunk`] each is its own row; with
//! [`Unit::Document`] a chunked document is one row scored by its best chunk (MaxP): the
//! highest BM25 of its chunks in the sparse list, the highest cosine in the dense list.
//!
//! - **Sparse**: Okapi BM25 over the postings of the query's own lexemes (`rcp_postings` for
//!   whole documents, `rcp_chunk_postings` for chunks), the collection being every searched row
//!   (`doc_count + chunk_count` in `rcp_state`, idf from `rcp_terms`). Exact.
//! - **Dense**: cosine through pgvector's HNSW indexes (one per table), or an exact scan when a
//!   filter is present or the list is deeper than the beam. Grouping chunks by document reads
//!   the [`WIDEN`]·limit nearest chunks from the index (at most [`MAX_EF_SEARCH`]); a document
//!   with none of its chunks among them is not in the dense list. An exact scan groups every
//!   chunk.
//! - **Filters** (§8) apply to a chunk through its document's metadata.

use std::collections::BTreeMap;

use rcp_corpus::chunking::Chunk;
use rcp_corpus::trust::TrustLevel;
use rcp_wire::filter::{FieldType, Filter};
use serde_json::Value;
use tokio_postgres::Row;

use crate::db::DbError;
use crate::filter::{Params, compile};

pub use rcp_corpus::chunking::Unit;

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
    /// The trust level of the document (a chunk's is its document's).
    pub trust: TrustLevel,
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

/// How many chunks per wanted document a grouped dense list reads from the HNSW index.
pub const WIDEN: usize = 4;

/// A built statement: its SQL, its bind parameters, the beam width it wants and whether its
/// dense list is an exact scan.
#[derive(Debug)]
pub struct Statement {
    /// The SQL text; every value is a bind parameter.
    pub sql: String,
    /// The values.
    pub params: Params,
    /// `hnsw.ef_search` for the index scans.
    pub ef_search: usize,
    /// Whether the dense list is computed by an exact scan (no `hnsw.ef_search` needed).
    pub exact: bool,
}

/// The columns every row of the statement has, in order (see [`decode`]):
/// list (`s`/`d`), document id, chunk index, chunk start, chunk end, title, text, metadata,
/// trust level, BM25, cosine, vector (text), index version.
const ROW: &str = "d.id, x.chunk, c.start_byte, c.end_byte, d.title, coalesce(c.body, d.body), d.metadata, d.trust";

/// Builds the statement of `s` over the filterable `fields`, or `None` when a dense list is
/// wanted without a query vector.
pub fn statement(s: &Search<'_>, fields: &BTreeMap<String, FieldType>) -> Option<Statement> {
    let mut p = Params::new();
    let where_ = match s.filter {
        Some(f) => compile(f, fields, &mut p),
        None => "TRUE".to_owned(),
    };
    let limit = p.push(s.limit as i64);
    let text = p.push(s.text.to_owned());
    let vector = s.vector.map(|v| p.push(vector_literal(v)));
    // HNSW returns at most ef_search rows, and a filter applied after it can leave too few:
    // filtered or very deep searches scan exactly (`+ 0` keeps the planner off the index).
    let exact = s.filter.is_some() || s.limit > MAX_EF_SEARCH;
    let depth = (s.limit.saturating_mul(WIDEN)).min(MAX_EF_SEARCH).max(s.limit);
    let with_vec = if s.with_vectors { "coalesce(c.embedding, d.embedding)::text" } else { "NULL::text" };
    let version = "(SELECT version FROM rcp_state)";
    let sparse = || {
        let ctes = sparse_ctes(s, &where_, &text, &limit);
        let cosine = match &vector {
            // A chunk's own cosine; a chunked document's best chunk's; a whole document's.
            Some(v) => format!(
                "CASE WHEN c.doc_id IS NOT NULL THEN 1 - (c.embedding <=> {v}::vector) \
                 WHEN d.chunked THEN (SELECT 1 - min(y.embedding <=> {v}::vector) FROM rcp_chunks y WHERE y.doc_id = d.id) \
                 ELSE 1 - (d.embedding <=> {v}::vector) END"
            ),
            None => "NULL::float8".to_owned(),
        };
        let select = format!(
            "SELECT 's' AS list, {ROW}, x.score, {cosine}, {with_vec}, {version}
             FROM sparse x JOIN rcp_documents d ON d.id = x.id LEFT JOIN rcp_chunks c ON c.doc_id = x.id AND c.idx = x.chunk
             ORDER BY x.score DESC, x.id, x.chunk NULLS FIRST"
        );
        (ctes, select)
    };
    let dense = |v: &str| {
        let cte = dense_cte(s.unit, v, &where_, &limit, depth, s.filter.is_some(), exact);
        let select = format!(
            "SELECT 'd' AS list, {ROW}, NULL::float8, 1 - x.dist, {with_vec}, {version}
             FROM dense x JOIN rcp_documents d ON d.id = x.id LEFT JOIN rcp_chunks c ON c.doc_id = x.id AND c.idx = x.chunk
             ORDER BY x.dist, x.id, x.chunk NULLS FIRST"
        );
        (cte, select)
    };
    let sql = match (s.lists, &vector) {
        (Lists::Sparse, _) => {
            let (ctes, select) = sparse();
            format!("WITH {ctes} {select}")
        }
        (Lists::Dense, Some(v)) => {
            let (cte, select) = dense(v);
            format!("WITH {cte} {select}")
        }
        (Lists::Both, Some(v)) => {
            let (ctes, sparse_select) = sparse();
            let (cte, dense_select) = dense(v);
            format!("WITH {ctes}, {cte} ({sparse_select}) UNION ALL ({dense_select})")
        }
        (_, None) => return None,
    };
    let ef_search = s.ef_search.max(s.limit).max(if s.unit == Unit::Document { depth } else { 0 });
    Some(Statement {
        sql,
        params: p,
        ef_search: ef_search.clamp(1, MAX_EF_SEARCH),
        exact: exact && s.lists != Lists::Sparse,
    })
}

/// The sparse list as the CTE `sparse (id, chunk, score)`: BM25 of every searched row sharing a
/// query lexeme (a filter joins the documents), in the unit asked for.
///
/// The lexeme list is repeated on the postings themselves: joined only through `q`, the planner
/// cannot tell how few lexemes there are and merge-joins the whole postings index (59 ms
/// instead of 6.6 ms for a Cranfield query at 1,400 documents).
fn sparse_ctes(s: &Search<'_>, where_: &str, text: &str, limit: &str) -> String {
    let filter_join = if s.filter.is_some() {
        format!("JOIN rcp_documents d ON d.id = p.doc_id AND {where_}")
    } else {
        String::new()
    };
    let bm25 = format!(
        "sum(q.idf * p.tf * ({k1} + 1) / (p.tf + {k1} * (1 - {b} + {b} * p.doc_len / st.avgdl)))",
        k1 = BM25_K1,
        b = BM25_B
    );
    let lexemes = format!("p.lexeme = ANY (tsvector_to_array(to_tsvector('english'::regconfig, {text})))");
    let pick = match s.unit {
        Unit::Chunk => {
            format!("SELECT id, chunk, score FROM scored ORDER BY score DESC, id, chunk NULLS FIRST LIMIT {limit}")
        }
        Unit::Document => format!(
            "SELECT id, NULL::int4 AS chunk, max(score) AS score FROM scored GROUP BY id ORDER BY score DESC, id LIMIT {limit}"
        ),
    };
    format!(
        "st AS (SELECT (doc_count + chunk_count)::float8 AS n,
                       greatest((total_len + chunk_len)::float8 / greatest(doc_count + chunk_count, 1), 1.0) AS avgdl
                FROM rcp_state),
         q AS (SELECT t.lexeme, ln(1 + (st.n - t.df + 0.5) / (t.df + 0.5)) AS idf
               FROM rcp_terms t CROSS JOIN st
               WHERE t.lexeme = ANY (tsvector_to_array(to_tsvector('english'::regconfig, {text}))) AND t.df > 0),
         scored AS (SELECT p.doc_id AS id, NULL::int4 AS chunk, {bm25} AS score
                    FROM rcp_postings p JOIN q ON q.lexeme = p.lexeme CROSS JOIN st {filter_join}
                    WHERE {lexemes} GROUP BY p.doc_id
                    UNION ALL
                    SELECT p.doc_id, p.chunk, {bm25}
                    FROM rcp_chunk_postings p JOIN q ON q.lexeme = p.lexeme CROSS JOIN st {filter_join}
                    WHERE {lexemes} GROUP BY p.doc_id, p.chunk),
         sparse AS ({pick})"
    )
}

/// The dense list as the CTE `dense (id, chunk, dist)`: the nearest whole documents and the
/// nearest chunks (grouped by document for [`Unit::Document`]), merged by distance.
fn dense_cte(unit: Unit, v: &str, where_: &str, limit: &str, depth: usize, filtered: bool, exact: bool) -> String {
    let order = |col: &str| {
        if exact { format!("({col} <=> {v}::vector) + 0") } else { format!("{col} <=> {v}::vector") }
    };
    // A chunk is filtered through its document; without a filter it is read alone, so the
    // planner walks the chunks' HNSW index.
    let chunks_from = if filtered {
        format!("rcp_chunks c JOIN rcp_documents d ON d.id = c.doc_id WHERE {where_}")
    } else {
        "rcp_chunks c".to_owned()
    };
    let chunks = match unit {
        Unit::Chunk => format!(
            "(SELECT c.doc_id AS id, c.idx AS chunk, c.embedding <=> {v}::vector AS dist
              FROM {chunks_from} ORDER BY {order} LIMIT {limit})",
            order = order("c.embedding")
        ),
        // The first chunk of a document in distance order is its best. An exact scan reads
        // every chunk; the index, the `depth` nearest (an integer we computed, not input).
        Unit::Document if exact => format!(
            "(SELECT DISTINCT ON (c.doc_id) c.doc_id AS id, NULL::int4 AS chunk, c.embedding <=> {v}::vector AS dist
              FROM {chunks_from} ORDER BY c.doc_id, dist)"
        ),
        Unit::Document => format!(
            "(SELECT DISTINCT ON (n.id) n.id, NULL::int4 AS chunk, n.dist
              FROM (SELECT c.doc_id AS id, c.embedding <=> {v}::vector AS dist
                    FROM {chunks_from} ORDER BY {order} LIMIT {depth}) n
              ORDER BY n.id, n.dist)",
            order = order("c.embedding")
        ),
    };
    format!(
        "dense AS (SELECT id, chunk, dist FROM (
             (SELECT d.id, NULL::int4 AS chunk, d.embedding <=> {v}::vector AS dist
              FROM rcp_documents d WHERE d.embedding IS NOT NULL AND {where_} ORDER BY {order} LIMIT {limit})
             UNION ALL {chunks}) u
           ORDER BY dist, id, chunk NULLS FIRST LIMIT {limit})",
        order = order("d.embedding")
    )
}

/// A row of [`statement`]'s result: its list (`s` or `d`), the row, and the version the
/// statement saw.
pub(crate) fn decode(row: &Row) -> Result<(String, Found, i64), DbError> {
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
    // The column's CHECK admits only the three levels; anything else is not trusted.
    let trust = TrustLevel::from_wire(row.try_get(8)?).unwrap_or(TrustLevel::Untrusted);
    let vector: Option<String> = row.try_get(11)?;
    let found = Found {
        id: row.try_get(1)?,
        chunk,
        title: row.try_get(5)?,
        body: row.try_get(6)?,
        metadata,
        trust,
        bm25: row.try_get(9)?,
        cosine: row.try_get(10)?,
        vector: vector.as_deref().and_then(parse_vector),
    };
    Ok((list, found, row.try_get(12)?))
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

/// A stored vector from its pgvector text form (`[0.1,0.2,...]`).
fn parse_vector(text: &str) -> Option<Vec<f32>> {
    serde_json::from_str(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(lists: Lists, unit: Unit) -> Search<'static> {
        Search {
            text: "wing",
            vector: Some(&[0.5, 0.5]),
            lists,
            filter: None,
            limit: 10,
            ef_search: 64,
            with_vectors: false,
            unit,
        }
    }

    #[test]
    fn units_shape_the_lists() {
        let fields = BTreeMap::new();
        let doc = statement(&search(Lists::Both, Unit::Document), &fields).expect("statement");
        assert!(doc.sql.contains("max(score) AS score FROM scored GROUP BY id"), "{}", doc.sql);
        assert!(doc.sql.contains("DISTINCT ON (n.id)"), "{}", doc.sql);
        assert_eq!((doc.ef_search, doc.exact), (64, false));
        let chunk = statement(&search(Lists::Both, Unit::Chunk), &fields).expect("statement");
        assert!(!chunk.sql.contains("GROUP BY id ") && !chunk.sql.contains("DISTINCT ON"), "{}", chunk.sql);
        let deep = Search { limit: 400, ..search(Lists::Dense, Unit::Document) };
        let deep = statement(&deep, &fields).expect("statement");
        assert_eq!(deep.ef_search, MAX_EF_SEARCH, "a grouped list widens the beam, up to pgvector's cap");
        let no_vector = Search { vector: None, ..search(Lists::Dense, Unit::Chunk) };
        assert!(statement(&no_vector, &fields).is_none());
    }
}
