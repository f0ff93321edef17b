//! Versioned schema migrations, kept in `migrations/` and compiled into the binary.
//!
//! [`migrate`] applies the missing ones in order, each in its own transaction, under an
//! advisory lock, so processes starting together over one database migrate it exactly once.
//! A database migrated by a newer binary is refused rather than served with a schema this
//! binary does not know. The HNSW indexes (documents' and chunks' vectors) are built after the
//! migrations with the configured `m`/`ef_construction` (integers, checked) when they do not
//! exist yet.

use tokio_postgres::Client;

use crate::db::DbError;

/// The migrations, in order: (version, name, SQL).
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "init", include_str!("../migrations/0001_init.sql")),
    (2, "postings", include_str!("../migrations/0002_postings.sql")),
    (3, "feedback", include_str!("../migrations/0003_feedback.sql")),
    (4, "chunks", include_str!("../migrations/0004_chunks.sql")),
    (5, "trust", include_str!("../migrations/0005_trust.sql")),
];

/// The HNSW indexes [`migrate`] builds, as (table, index): whole documents' and chunks' vectors.
const HNSW_INDEXES: [(&str, &str); 2] =
    [("rcp_documents", "rcp_documents_embedding"), ("rcp_chunks", "rcp_chunks_embedding")];

/// The schema version this binary serves.
pub fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// An arbitrary constant naming this schema's advisory lock.
const LOCK_KEY: i64 = 0x7263_705f_7067; // "rcp_pg"

/// HNSW build parameters of the vector index (pgvector's `m` and `ef_construction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HnswParams {
    /// Links per node and layer (pgvector allows 2..=100).
    pub m: u32,
    /// Beam width while building (pgvector allows 4..=1000, and at least `2·m`).
    pub ef_construction: u32,
}

impl Default for HnswParams {
    fn default() -> Self {
        Self { m: 16, ef_construction: 64 }
    }
}

/// What [`migrate`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigrateReport {
    /// Versions applied now.
    pub applied: Vec<i32>,
    /// Whether an HNSW index (of documents or of chunks) was created now.
    pub created_hnsw: bool,
}

/// Brings the schema to [`latest`] and makes sure the HNSW indexes exist.
pub async fn migrate(client: &mut Client, hnsw: HnswParams) -> Result<MigrateReport, DbError> {
    if !(2..=100).contains(&hnsw.m) || !(4..=1000).contains(&hnsw.ef_construction) || hnsw.ef_construction < 2 * hnsw.m
    {
        return Err(DbError::Schema(format!(
            "HNSW m={} ef_construction={}: need 2 <= m <= 100 and 2*m <= ef_construction <= 1000",
            hnsw.m, hnsw.ef_construction
        )));
    }
    let mut report = MigrateReport::default();
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY]).await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS rcp_migrations (
             version integer PRIMARY KEY,
             name text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await?;
    let rows = tx.query("SELECT version FROM rcp_migrations ORDER BY version", &[]).await?;
    let applied: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    if let Some(&newest) = applied.last()
        && newest > latest()
    {
        return Err(DbError::Schema(format!(
            "the database is at schema version {newest}, newer than this rcp-pg ({}); upgrade rcp-pg",
            latest()
        )));
    }
    for &(version, name, sql) in MIGRATIONS {
        if applied.contains(&version) {
            continue;
        }
        tx.batch_execute(sql).await?;
        tx.execute("INSERT INTO rcp_migrations (version, name) VALUES ($1, $2)", &[&version, &name]).await?;
        report.applied.push(version);
    }
    for (table, index) in HNSW_INDEXES {
        let has_index = tx
            .query_opt("SELECT 1 FROM pg_indexes WHERE tablename = $1 AND indexname = $2", &[&table, &index])
            .await?
            .is_some();
        if !has_index {
            // DDL takes no bind parameters: the names are constants, both values range-checked
            // integers above.
            tx.batch_execute(&format!(
                "CREATE INDEX {index} ON {table} USING hnsw (embedding vector_cosine_ops) \
                 WITH (m = {}, ef_construction = {})",
                hnsw.m, hnsw.ef_construction
            ))
            .await?;
            report.created_hnsw = true;
        }
    }
    tx.commit().await?;
    Ok(report)
}

/// Checks that the schema is at [`latest`] without changing anything (for `serve --no-migrate`).
pub async fn check(client: &Client) -> Result<(), DbError> {
    let version: Option<i32> = match client.query_one("SELECT max(version) FROM rcp_migrations", &[]).await {
        Ok(row) => row.get(0),
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => None,
        Err(e) => return Err(e.into()),
    };
    match version {
        Some(v) if v == latest() => Ok(()),
        Some(v) => {
            Err(DbError::Schema(format!("schema version {v}, this rcp-pg serves {}; run `rcp-pg migrate`", latest())))
        }
        None => Err(DbError::Schema("no rcp-pg schema in this database; run `rcp-pg migrate`".into())),
    }
}
