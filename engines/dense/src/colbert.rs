//! Late interaction stored at indexing: `rcp-dense index --colbert` encodes every live
//! document's text with ColBERT into the data directory's matrix file
//! (`DATA_DIR/colbert-matrices`, [`rcp_rerank::MatrixStore`]), which `serve --rerank colbert`
//! then reads, so a ColBERT rerank encodes only the query. The file is keyed by each
//! document's text, exactly the passage a hit carries to the reranker; documents already in it
//! are not encoded again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use rcp_rerank::{Colbert, MATRIX_FILE, MatrixHome, MatrixStore};

use crate::store::Store;

/// The flags of `index` that store ColBERT matrices.
#[derive(Debug, Clone, Args)]
pub(crate) struct ColbertIndexArgs {
    /// Also encode every document with ColBERT (answerai-colbert-small-v1) into
    /// DATA_DIR/colbert-matrices (int8, 388 bytes a token), for `serve --rerank colbert`.
    #[arg(long)]
    colbert: bool,
    /// ColBERT's directory [default: $RCP_COLBERT_MODEL_DIR, else the user cache (~/.cache on Linux)/rcp/models/answerai-colbert-small-v1-int8].
    #[arg(long, value_name = "DIR", requires = "colbert")]
    colbert_model_dir: Option<PathBuf>,
    /// Provision ColBERT (as `rcp-rerank fetch-model` does) when it is missing.
    #[arg(long, requires = "colbert")]
    colbert_fetch_model: bool,
}

/// What storing the matrices did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stored {
    /// Documents encoded by this run.
    pub(crate) encoded: usize,
    /// Matrices in the file.
    pub(crate) matrices: usize,
    /// Bytes of matrices in the file.
    pub(crate) bytes: u64,
    /// Token rows in the file.
    pub(crate) rows: u64,
}

/// ColBERT and the data directory's matrix file, ready before the corpus is embedded (so a
/// missing model or a foreign file stops the run before hours of embedding, not after).
pub(crate) struct Prepared {
    colbert: Arc<Colbert>,
    matrices: MatrixStore,
    file: PathBuf,
}

impl ColbertIndexArgs {
    /// With `--colbert`: ColBERT loaded and `dir`'s matrix file open.
    pub(crate) fn prepare(&self, dir: &Path) -> anyhow::Result<Option<Prepared>> {
        if !self.colbert {
            return Ok(None);
        }
        let colbert = rcp_rerank::load_colbert(self.colbert_model_dir.as_ref(), self.colbert_fetch_model)?;
        let file = dir.join(MATRIX_FILE);
        let matrices = MatrixHome::File(file.clone()).open()?;
        Ok(Some(Prepared { colbert, matrices, file }))
    }
}

impl Prepared {
    /// Encodes the documents of `store` that the matrix file lacks.
    pub(crate) fn fill(self, store: &Store, say: &mut dyn FnMut(&str)) -> anyhow::Result<Stored> {
        let Self { colbert, matrices, file } = self;
        let texts: Vec<String> = store.read().documents().map(|d| d.text.clone()).collect();
        let bar = rcp_corpus::progress::bar(texts.len() as u64, "colbert");
        let started = Instant::now();
        let mut encoded = 0;
        for part in texts.chunks(64) {
            encoded += colbert.store_documents(part, &matrices, &|| false)?;
            bar.inc(part.len() as u64);
        }
        matrices.sync()?;
        bar.finish_and_clear();
        let stored = Stored { encoded, matrices: matrices.len(), bytes: matrices.bytes(), rows: matrices.rows() };
        say(&format!(
            "ColBERT: encoded {encoded} documents in {:.1} s; {} matrices, {} token rows, {:.1} KiB a document \
             ({:.1} MiB) in {}",
            started.elapsed().as_secs_f64(),
            stored.matrices,
            stored.rows,
            stored.bytes as f64 / stored.matrices.max(1) as f64 / 1024.0,
            stored.bytes as f64 / f64::from(1 << 20),
            file.display()
        ));
        Ok(stored)
    }
}
