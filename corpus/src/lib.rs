//! Corpus input shared by every engine: JSONL documents in the BEIR layout (`_id`/`id`,
//! `title`, `text`, any other field becomes metadata) and a small built-in demo corpus.
//!
//! [`chunking`] splits a document into the sentence-aware windows of `index/add` `chunk:true`
//! (§7.10), the one chunker of every engine that chunks.
//!
//! [`trust`] is the provenance level engines record per document and put on their hits.
//!
//! A [`CorpusDoc`] converts to and from the `index/add` [`Document`] of the spec (§7.10), so an
//! engine can bulk-load a file with the same code path it uses for live writes.
//!
//! Reading is strict about what it cannot use and precise about where: invalid UTF-8,
//! invalid JSON, a non-object line or a missing `text` is an error naming the line.
//!
//! # Cargo features
//!
//! - `progress` (off by default): the `progress` module, the progress bar the engines' index
//!   commands draw while a corpus loads (indicatif).

#![forbid(unsafe_code)]

pub mod chunking;
pub mod fields;
pub mod policy;
#[cfg(feature = "progress")]
pub mod progress;
pub mod recency;
pub mod trust;
pub mod validate;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use rcp_wire::Meta;
use rcp_wire::filter::FieldType;
use rcp_wire::index::Document;
use serde_json::Value;

/// One corpus document.
#[derive(Debug, Clone, PartialEq)]
pub struct CorpusDoc {
    /// The document id (`_id` or `id`; numbers are stringified). `None` lets the engine mint one.
    pub id: Option<String>,
    /// Title, if any.
    pub title: Option<String>,
    /// Body.
    pub text: String,
    /// Every other field.
    pub meta: Meta,
}

impl CorpusDoc {
    /// The document as an `index/add` document (the title travels in `meta.title`).
    pub fn to_document(&self) -> Document {
        let mut meta = self.meta.clone();
        if let Some(t) = &self.title {
            meta.insert("title".into(), Value::from(t.clone()));
        }
        Document { id: self.id.clone(), text: self.text.clone(), meta: (!meta.is_empty()).then_some(meta) }
    }

    /// A corpus document from an `index/add` document (`meta.title` becomes the title).
    pub fn from_document(doc: &Document) -> Self {
        let mut meta = doc.meta.clone().unwrap_or_default();
        let title = match meta.remove("title") {
            Some(Value::String(t)) => Some(t),
            Some(other) => {
                meta.insert("title".into(), other);
                None
            }
            None => None,
        };
        Self { id: doc.id.clone(), title, text: doc.text.clone(), meta }
    }

    /// Parses one JSONL record.
    pub fn from_json(v: Value) -> Result<Self, RecordError> {
        let Value::Object(mut obj) = v else {
            return Err(RecordError::NotAnObject);
        };
        let id = match obj.remove("_id").or_else(|| obj.remove("id")) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.is_empty() => Some(s),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(other) => return Err(RecordError::Id(other)),
        };
        let title = match obj.remove("title") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(other) => return Err(RecordError::Title(other)),
        };
        let text = match obj.remove("text") {
            Some(Value::String(s)) => s,
            None | Some(Value::Null) => return Err(RecordError::MissingText),
            Some(other) => return Err(RecordError::Text(other)),
        };
        let meta = match obj.remove("metadata") {
            Some(Value::Object(m)) if obj.is_empty() => m,
            Some(Value::Object(m)) => {
                let mut all = obj;
                all.extend(m);
                all
            }
            Some(other) => {
                obj.insert("metadata".into(), other);
                obj
            }
            None => obj,
        };
        Ok(Self { id, title, text, meta })
    }
}

/// Why one JSONL record is not a usable document.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The line is not JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The line is JSON but not an object.
    #[error("a corpus line must be a JSON object")]
    NotAnObject,
    /// `_id`/`id` is neither a non-empty string nor a number.
    #[error("'_id' must be a non-empty string or a number, got {0}")]
    Id(Value),
    /// `title` is not a string.
    #[error("'title' must be a string, got {0}")]
    Title(Value),
    /// There is no `text`.
    #[error("missing 'text'")]
    MissingText,
    /// `text` is not a string.
    #[error("'text' must be a string, got {0}")]
    Text(Value),
}

/// Why a corpus could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CorpusError {
    /// The file could not be opened or read.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error, printed in this error's message (so not also its `source`, which
        /// would print it twice in a cause chain).
        cause: std::io::Error,
    },
    /// A line is not valid UTF-8.
    #[error("{path}:{line}: invalid UTF-8 at byte {offset} of the line")]
    Utf8 {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// Byte offset of the first invalid byte within the line.
        offset: usize,
    },
    /// A line is not a usable document.
    #[error("{}:{line}: {cause}", path.display())]
    Record {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong, printed in this error's message (so not also its `source`).
        cause: RecordError,
    },
    /// A document whose metadata does not fit a declared field ([`validate::check_meta`]),
    /// worded as `rcpctl index add` reports it: `FILE:LINE: ID: FIELD: REASON`.
    #[error("{}:{line}: {id}: {}: {}", path.display(), cause.field, cause.reason())]
    Field {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The document's id, or `(no id)`.
        id: String,
        /// The value that does not fit.
        cause: validate::FieldValueError,
    },
}

impl CorpusError {
    /// Whether this error is about one line (which an `index` command skips, or stops at with
    /// `--strict`) rather than the file as a whole (which ends the run).
    pub fn is_line(&self) -> bool {
        !matches!(self, CorpusError::Io { .. })
    }
}

/// Reads a JSONL corpus lazily, one document per non-blank line.
pub fn read_jsonl(path: impl AsRef<Path>) -> Result<impl Iterator<Item = Result<CorpusDoc, CorpusError>>, CorpusError> {
    read_jsonl_checked(path, BTreeMap::new())
}

/// [`read_jsonl`], and a document whose metadata does not fit one of the declared `fields` is
/// a [`CorpusError::Field`] naming its line, id and field: the ingestion rule of every
/// engine's `index` command ([`validate::check_meta`]).
pub fn read_jsonl_checked(
    path: impl AsRef<Path>,
    fields: BTreeMap<String, FieldType>,
) -> Result<impl Iterator<Item = Result<CorpusDoc, CorpusError>>, CorpusError> {
    let path = path.as_ref().to_path_buf();
    let file = File::open(&path).map_err(|cause| CorpusError::Io { path: path.clone(), cause })?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut line_no = 0usize;
    let mut buf = Vec::new();
    Ok(std::iter::from_fn(move || {
        loop {
            buf.clear();
            line_no += 1;
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(cause) => return Some(Err(CorpusError::Io { path: path.clone(), cause })),
            }
            let text = match std::str::from_utf8(&buf) {
                Ok(t) => t.trim(),
                Err(e) => {
                    return Some(Err(CorpusError::Utf8 { path: path.clone(), line: line_no, offset: e.valid_up_to() }));
                }
            };
            if text.is_empty() {
                continue;
            }
            let record = serde_json::from_str::<Value>(text)
                .map_err(RecordError::from)
                .and_then(CorpusDoc::from_json)
                .map_err(|cause| CorpusError::Record { path: path.clone(), line: line_no, cause })
                .and_then(|doc| match validate::check_meta(&doc.meta, &fields) {
                    Ok(()) => Ok(doc),
                    Err(cause) => Err(CorpusError::Field {
                        path: path.clone(),
                        line: line_no,
                        id: doc.id.clone().unwrap_or_else(|| "(no id)".to_owned()),
                        cause,
                    }),
                });
            return Some(record);
        }
    }))
}

/// Counts the non-blank lines of a JSONL file (for progress bars).
pub fn count_lines(path: impl AsRef<Path>) -> Result<u64, CorpusError> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|cause| CorpusError::Io { path: path.to_path_buf(), cause })?;
    let mut n = 0;
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|cause| CorpusError::Io { path: path.to_path_buf(), cause })?;
        if !line.iter().all(u8::is_ascii_whitespace) {
            n += 1;
        }
    }
    Ok(n)
}

const BUILTIN: &[(&str, &str, &str, &str, i64)] = &[
    (
        "rcp-1",
        "The Retrieval Context Protocol",
        "RCP is JSON-RPC 2.0 for retrieval engines: clients negotiate a version, read the advertised capabilities and gate every call on them.",
        "protocols",
        2025,
    ),
    (
        "rcp-2",
        "Federated search",
        "Federation fans one query out to many engines concurrently and fuses their ranked lists, dropping slow engines after a deadline.",
        "protocols",
        2025,
    ),
    (
        "mcp-1",
        "Model Context Protocol",
        "MCP standardises how language-model applications call tools and read resources over JSON-RPC.",
        "protocols",
        2024,
    ),
    (
        "lsp-1",
        "Language Server Protocol",
        "LSP lets one editor talk to many language servers for completion, diagnostics and go-to-definition.",
        "protocols",
        2016,
    ),
    (
        "bm25-1",
        "BM25 ranking",
        "BM25 scores a document by term frequency with saturation, inverse document frequency and document length normalisation.",
        "retrieval",
        1994,
    ),
    (
        "bm25-2",
        "Inverted indexes",
        "An inverted index maps each term to the list of documents containing it, which makes lexical search fast.",
        "retrieval",
        1990,
    ),
    (
        "dense-1",
        "Dense retrieval",
        "Dense retrieval embeds queries and passages with a neural encoder and ranks passages by cosine similarity.",
        "retrieval",
        2020,
    ),
    (
        "dense-2",
        "Sentence embeddings",
        "Sentence transformers produce one vector per sentence so that semantically similar sentences lie close together.",
        "retrieval",
        2019,
    ),
    (
        "hnsw-1",
        "Approximate nearest neighbours",
        "HNSW builds a layered proximity graph and searches it greedily, trading a little recall for large speedups.",
        "retrieval",
        2016,
    ),
    (
        "rrf-1",
        "Reciprocal rank fusion",
        "Reciprocal rank fusion adds one over sixty plus the rank from every list, needing no comparable scores.",
        "retrieval",
        2009,
    ),
    (
        "mmr-1",
        "Diversity in results",
        "Maximal marginal relevance picks results that are relevant yet different from those already chosen.",
        "retrieval",
        1998,
    ),
    (
        "rerank-1",
        "Cross-encoder reranking",
        "A cross-encoder reads the query and a candidate passage together and outputs a precise relevance score.",
        "retrieval",
        2019,
    ),
    (
        "rag-1",
        "Retrieval-augmented generation",
        "RAG retrieves passages relevant to a question and gives them to a language model as context for its answer.",
        "llm",
        2020,
    ),
    (
        "rag-2",
        "Chunking documents",
        "Long documents are split into overlapping chunks so each piece fits the embedding model and the prompt.",
        "llm",
        2023,
    ),
    (
        "llm-1",
        "Transformers",
        "The transformer architecture relies on self-attention to relate every token of a sequence to every other token.",
        "llm",
        2017,
    ),
    (
        "llm-2",
        "Prompt injection",
        "Text retrieved from untrusted sources can carry instructions that try to hijack the model reading it.",
        "llm",
        2023,
    ),
    (
        "rust-1",
        "Ownership in Rust",
        "Rust's ownership and borrowing rules let the compiler prove memory safety without a garbage collector.",
        "rust",
        2015,
    ),
    (
        "rust-2",
        "Async Rust",
        "Async functions compile to state machines that an executor such as Tokio polls to completion.",
        "rust",
        2019,
    ),
    (
        "rust-3",
        "Tantivy",
        "Tantivy is a full-text search engine library written in Rust, inspired by Lucene.",
        "rust",
        2016,
    ),
    (
        "db-1",
        "Write-ahead logging",
        "A write-ahead log records every change durably before it is applied, so a crash never loses an acknowledged write.",
        "databases",
        1992,
    ),
    (
        "db-2",
        "Snapshot isolation",
        "Under snapshot isolation each reader sees a consistent version of the data while writers continue.",
        "databases",
        1995,
    ),
    (
        "db-3",
        "Log-structured merge trees",
        "LSM trees buffer writes in memory and merge sorted runs on disk in the background.",
        "databases",
        1996,
    ),
    (
        "net-1",
        "Server-sent events",
        "Server-sent events stream a sequence of text events from a server to a browser over one HTTP response.",
        "networking",
        2009,
    ),
    (
        "net-2",
        "Rate limiting",
        "A token bucket admits requests at a sustained rate with bounded bursts and rejects the rest.",
        "networking",
        2001,
    ),
    (
        "space-1",
        "Orbital mechanics",
        "A spacecraft in low Earth orbit circles the planet roughly every ninety minutes at about eight kilometres per second.",
        "science",
        1960,
    ),
    (
        "space-2",
        "Wing aerodynamics",
        "Lift on a wing comes from the pressure difference between its upper and lower surfaces as air flows past.",
        "science",
        1930,
    ),
    (
        "bio-1",
        "Photosynthesis",
        "Plants convert light, water and carbon dioxide into glucose and oxygen in their chloroplasts.",
        "science",
        1950,
    ),
    (
        "food-1",
        "Sourdough bread",
        "Sourdough rises thanks to wild yeast and lactic acid bacteria living in a fermented starter.",
        "cooking",
        2012,
    ),
    (
        "food-2",
        "Espresso",
        "Espresso forces hot water through finely ground coffee under about nine bars of pressure.",
        "cooking",
        1950,
    ),
    (
        "music-1",
        "Equal temperament",
        "Equal temperament divides the octave into twelve semitones whose frequency ratio is the twelfth root of two.",
        "music",
        1700,
    ),
];

/// A small built-in corpus (30 short documents across a dozen topics, with `topic` and `year`
/// metadata) so engines and examples run with zero set-up. Every bundled engine serves the same
/// ids, which lets federation fuse their lists meaningfully.
pub fn builtin() -> Vec<CorpusDoc> {
    BUILTIN
        .iter()
        .map(|(id, title, text, topic, year)| {
            let mut meta = Meta::new();
            meta.insert("topic".into(), Value::from(*topic));
            meta.insert("year".into(), Value::from(*year));
            CorpusDoc { id: Some((*id).to_owned()), title: Some((*title).to_owned()), text: (*text).to_owned(), meta }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn beir_records_and_extra_fields() {
        let d = CorpusDoc::from_json(json!({"_id": 7, "title": "t", "text": "x", "year": 1999})).unwrap();
        assert_eq!(d.id.as_deref(), Some("7"));
        assert_eq!(d.meta["year"], 1999);
        assert!(matches!(CorpusDoc::from_json(json!({"_id": "a"})), Err(RecordError::MissingText)));
        assert!(matches!(CorpusDoc::from_json(json!([1])), Err(RecordError::NotAnObject)));
        let back = CorpusDoc::from_document(&d.to_document());
        assert_eq!(back, d);
    }

    #[test]
    fn jsonl_errors_name_the_line() {
        let dir = std::env::temp_dir().join(format!("rcp-corpus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("c.jsonl");
        std::fs::write(&p, b"{\"_id\":\"a\",\"text\":\"ok\"}\n\n{\"_id\":\"b\",\"text\":\"bad \xff\"}\n{oops\n")
            .unwrap();
        let items: Vec<_> = read_jsonl(&p).unwrap().collect();
        assert!(items[0].is_ok());
        assert!(matches!(items[1], Err(CorpusError::Utf8 { line: 3, .. })), "{:?}", items[1]);
        assert!(matches!(items[2], Err(CorpusError::Record { line: 4, cause: RecordError::Json(_), .. })));
        let e = items[2].as_ref().expect_err("line 4 is bad");
        assert!(std::error::Error::source(e).is_none(), "the cause is in the message, not repeated as a source");
        let Err(missing) = read_jsonl(dir.join("nope.jsonl")) else { panic!("no such file") };
        let mut chain = missing.to_string();
        let mut next = std::error::Error::source(&missing);
        while let Some(c) = next {
            chain = format!("{chain}: {c}");
            next = c.source();
        }
        assert_eq!(chain.matches("No such file").count(), 1, "{chain}");
        assert_eq!(count_lines(&p).unwrap(), 3);
        assert_eq!(builtin().len(), 30);
    }
}
