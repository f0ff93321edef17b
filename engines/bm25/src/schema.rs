//! The index layout in one place: the persisted configuration of a data directory (its
//! filterable fields and identity) and the tantivy schema derived from it.
//!
//! A data directory holds `rcp-bm25.json` (this configuration) and `index/` (tantivy). The
//! filterable fields are fixed when the index is created, because a tantivy schema cannot
//! change afterwards; `serve` reads them back so it advertises exactly what was indexed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rcp_wire::filter::FieldType;
use serde::{Deserialize, Serialize};
use tantivy::schema::{
    FAST, Field, IndexRecordOption, NumericOptions, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};

use crate::analyzer::ANALYZER;
use crate::error::EngineError;

/// File name of the persisted configuration inside a data directory.
pub const CONFIG_FILE: &str = "rcp-bm25.json";
/// Sub-directory holding the tantivy index.
pub const INDEX_DIR: &str = "index";

/// Field types this engine can filter on (§8); `geo` is not supported.
pub const SUPPORTED_TYPES: &str = "keyword, text, int, float, bool, date";

/// One filterable metadata field (§8): a name and its type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldSpec {
    /// The metadata key, as clients name it in filters.
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub ty: FieldType,
}

impl FieldSpec {
    /// Parses `name:type` (the `--field` flag).
    pub fn parse(spec: &str) -> Result<Self, FieldError> {
        let (name, ty) = spec.rsplit_once(':').ok_or_else(|| FieldError::NotNameType(spec.to_owned()))?;
        Self::new(name, FieldType::parse(ty))
    }

    /// A checked field: a non-empty name that is not the title, and a supported type.
    pub fn new(name: &str, ty: FieldType) -> Result<Self, FieldError> {
        if name.is_empty() {
            return Err(FieldError::EmptyName);
        }
        if name == "title" {
            return Err(FieldError::Title);
        }
        match ty {
            FieldType::Keyword
            | FieldType::Text
            | FieldType::Int
            | FieldType::Float
            | FieldType::Bool
            | FieldType::Date => Ok(Self { name: name.to_owned(), ty }),
            other => Err(FieldError::Unsupported { name: name.to_owned(), ty: other }),
        }
    }
}

/// A filter field declaration this engine cannot take (`--field`, `--fields`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FieldError {
    /// A `--field` flag without `:`.
    #[error("'{0}' is not NAME:TYPE")]
    NotNameType(String),
    /// An empty name.
    #[error("a field name must not be empty")]
    EmptyName,
    /// `title`, which is the searched document title.
    #[error("'title' is the document title (searched as text) and cannot be a filter field")]
    Title,
    /// A type outside [`SUPPORTED_TYPES`].
    #[error("field '{name}': type '{ty}' is not supported; use one of {SUPPORTED_TYPES}")]
    Unsupported {
        /// The field.
        name: String,
        /// Its declared type.
        ty: FieldType,
    },
    /// One name declared with two types.
    #[error("field '{name}' declared as both {first} and {second}")]
    Conflict {
        /// The field.
        name: String,
        /// The type declared first.
        first: FieldType,
        /// The other type.
        second: FieldType,
    },
    /// A fields file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A fields file is not a JSON object of name → type.
    #[error("{path}: expected {{\"name\": \"type\", ...}}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The parse error.
        source: serde_json::Error,
    },
}

/// Reads a fields file: a JSON object mapping name → type, the same shape as the advertised
/// `filter.fields` (§8), e.g. `{"year": "int", "lang": "keyword"}`.
pub fn read_fields_file(path: &Path) -> Result<Vec<FieldSpec>, FieldError> {
    let text = std::fs::read_to_string(path).map_err(|source| FieldError::Read { path: path.to_owned(), source })?;
    let map: BTreeMap<String, String> =
        serde_json::from_str(&text).map_err(|source| FieldError::Json { path: path.to_owned(), source })?;
    map.into_iter().map(|(name, ty)| FieldSpec::new(&name, FieldType::parse(&ty))).collect()
}

/// Merges field declarations, rejecting a name declared twice with different types.
pub fn merge_fields(specs: impl IntoIterator<Item = FieldSpec>) -> Result<Vec<FieldSpec>, FieldError> {
    let mut out: Vec<FieldSpec> = Vec::new();
    for s in specs {
        match out.iter().find(|o| o.name == s.name) {
            Some(o) if o.ty != s.ty => {
                return Err(FieldError::Conflict { name: s.name, first: o.ty.clone(), second: s.ty });
            }
            Some(_) => {}
            None => out.push(s),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The layout of indexes created now: 2 adds the chunk fields ([`ChunkFields`]); indexes of
/// format 1 keep their schema and serve whole documents only.
pub const FORMAT: u32 = 2;

/// The persisted configuration of a data directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// Layout version of this file and the index (1, or [`FORMAT`]).
    pub format: u32,
    /// A random identity of this index, part of every `indexVersion` token, so a token from a
    /// rebuilt directory never names a snapshot of another index.
    pub uid: String,
    /// The filterable fields, in schema order.
    pub fields: Vec<FieldSpec>,
    /// The learned-sparse model whose expansions the index holds ([`crate::splade`]); absent
    /// for a BM25 index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_sparse: Option<String>,
}

impl Config {
    /// A fresh configuration with these fields.
    pub fn new(fields: Vec<FieldSpec>) -> Self {
        let uid = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
        Self { format: FORMAT, uid, fields, learned_sparse: None }
    }

    /// A fresh configuration with these fields, ranked by the learned-sparse model named
    /// `learned_sparse` (its identity) when there is one.
    pub fn with_learned_sparse(fields: Vec<FieldSpec>, learned_sparse: Option<String>) -> Self {
        Self { learned_sparse, ..Self::new(fields) }
    }

    /// Reads `DIR/rcp-bm25.json`; `None` when the directory holds no index yet.
    pub fn load(dir: &Path) -> Result<Option<Self>, EngineError> {
        let path = dir.join(CONFIG_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                serde_json::from_str(&text).map(Some).map_err(|source| EngineError::ConfigFile { path, source })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(EngineError::io(&path, e)),
        }
    }

    /// Writes `DIR/rcp-bm25.json` durably (temp file, fsync, rename).
    pub fn save(&self, dir: &Path) -> Result<(), EngineError> {
        use std::io::Write;
        let io = |e: std::io::Error| EngineError::io(dir, e);
        std::fs::create_dir_all(dir).map_err(io)?;
        let tmp = dir.join(format!("{CONFIG_FILE}.tmp"));
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        let text = serde_json::to_string_pretty(self)
            .map_err(|source| EngineError::ConfigFile { path: dir.join(CONFIG_FILE), source })?;
        f.write_all(text.as_bytes()).and_then(|_| f.sync_all()).map_err(io)?;
        std::fs::rename(&tmp, dir.join(CONFIG_FILE)).map_err(io)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

/// A filterable field's tantivy handles.
#[derive(Debug, Clone)]
pub struct MetaField {
    /// Its declaration.
    pub spec: FieldSpec,
    /// The exact-value field (raw string, i64, f64 or bool; dates as epoch milliseconds).
    pub field: Field,
    /// The column name of `field` (for fast-field access).
    pub column: String,
    /// For `text` fields: the analyzed copy used by `contains`.
    pub tokens: Option<Field>,
}

/// The fields that tie records to documents in an index of format 2 (§7.10 chunking). A
/// document added whole is one record; a chunked one is a parent record (the whole text, not
/// searched) and one searched record per chunk, all sharing the document id in `doc`.
#[derive(Debug, Clone, Copy)]
pub struct ChunkFields {
    /// The document id (raw, indexed, stored): the upsert and delete key of every record.
    pub doc: Field,
    /// A 64-bit hash of the document id (fast): what `unit:"document"` groups chunks by.
    pub doc_key: Field,
    /// Indexed and stored: `parent` on the parent record of a chunked document, absent otherwise.
    pub role: Field,
    /// Stored: the chunk's position in its document.
    pub index: Field,
    /// Stored: the chunk's first byte in the document text.
    pub start: Field,
    /// Stored: one past the chunk's last byte in the document text.
    pub end: Field,
}

/// Every tantivy field of the index.
#[derive(Debug, Clone)]
pub struct Fields {
    /// The document id (raw, indexed, stored): the upsert and delete key.
    pub id: Field,
    /// The title, analyzed.
    pub title: Field,
    /// The body, analyzed.
    pub text: Field,
    /// Stored: the title as given.
    pub title_raw: Field,
    /// Stored: the body as given.
    pub text_raw: Field,
    /// Stored: the metadata object as JSON, returned verbatim in `hit.meta`.
    pub meta: Field,
    /// Stored: the trust level of the document (§15).
    pub trust: Field,
    /// Stored: the citation source label.
    pub source: Field,
    /// Indexed: names of the filterable fields present in the document (for `exists`).
    pub present: Field,
    /// Indexed: names of the keyword fields whose value was an array (for `contains`).
    pub arrays: Field,
    /// The filterable fields, by name.
    pub filterable: BTreeMap<String, MetaField>,
    /// The chunk fields (indexes of format 2).
    pub chunks: Option<ChunkFields>,
    /// Indexed (term frequencies): the learned-sparse expansion of title and body, when the
    /// configuration names a model ([`crate::splade`]).
    pub impacts: Option<Field>,
}

/// Builds the tantivy schema for a configuration.
pub fn build(config: &Config) -> (Schema, Fields) {
    let mut b = Schema::builder();
    let analyzed = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default().set_tokenizer(ANALYZER).set_index_option(IndexRecordOption::WithFreqs),
    );
    let id = b.add_text_field("id", STRING | STORED);
    let title = b.add_text_field("title", analyzed.clone());
    let text = b.add_text_field("text", analyzed);
    let title_raw = b.add_text_field("title_raw", STORED);
    let text_raw = b.add_text_field("text_raw", STORED);
    let meta = b.add_text_field("meta", STORED);
    let trust = b.add_text_field("trust", STORED);
    let source = b.add_text_field("source", STORED);
    let present = b.add_text_field("present", STRING);
    let arrays = b.add_text_field("arrays", STRING);
    let mut filterable = BTreeMap::new();
    for (i, spec) in config.fields.iter().enumerate() {
        let column = format!("f{i}");
        let numeric = NumericOptions::default().set_indexed().set_fast();
        let field = match spec.ty {
            FieldType::Int | FieldType::Date => b.add_i64_field(&column, numeric),
            FieldType::Float => b.add_f64_field(&column, numeric),
            FieldType::Bool => b.add_bool_field(&column, numeric),
            _ => b.add_text_field(&column, STRING),
        };
        let tokens = (spec.ty == FieldType::Text).then(|| {
            let opts = TextOptions::default().set_indexing_options(
                TextFieldIndexing::default()
                    .set_tokenizer(ANALYZER)
                    .set_index_option(IndexRecordOption::WithFreqsAndPositions),
            );
            b.add_text_field(&format!("f{i}_tokens"), opts)
        });
        filterable.insert(spec.name.clone(), MetaField { spec: spec.clone(), field, column, tokens });
    }
    let impacts = config.learned_sparse.as_ref().map(|_| {
        let opts = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default().set_tokenizer("raw").set_index_option(IndexRecordOption::WithFreqs),
        );
        b.add_text_field("impacts", opts)
    });
    let chunks = (config.format >= 2).then(|| ChunkFields {
        doc: b.add_text_field("doc", STRING | STORED),
        doc_key: b.add_u64_field("doc_key", FAST),
        role: b.add_text_field("role", STRING | STORED),
        index: b.add_u64_field("chunk_index", STORED),
        start: b.add_u64_field("chunk_start", STORED),
        end: b.add_u64_field("chunk_end", STORED),
    });
    let schema = b.build();
    let fields = Fields {
        id,
        title,
        text,
        title_raw,
        text_raw,
        meta,
        trust,
        source,
        present,
        arrays,
        filterable,
        chunks,
        impacts,
    };
    (schema, fields)
}

/// The `doc_key` of a document id: 64-bit FNV-1a, stable across processes and versions.
pub fn doc_key(doc_id: &str) -> u64 {
    doc_id.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_errors_say_what_is_wrong_and_keep_their_cause() {
        assert!(matches!(FieldSpec::parse("year"), Err(FieldError::NotNameType(s)) if s == "year"));
        assert!(matches!(FieldSpec::parse(":int"), Err(FieldError::EmptyName)));
        assert!(matches!(FieldSpec::parse("title:text"), Err(FieldError::Title)));
        let geo = FieldSpec::parse("at:geo").unwrap_err();
        assert_eq!(geo.to_string(), format!("field 'at': type 'geo' is not supported; use one of {SUPPORTED_TYPES}"));
        let both = merge_fields([FieldSpec::parse("y:int").unwrap(), FieldSpec::parse("y:keyword").unwrap()]);
        assert_eq!(both.unwrap_err().to_string(), "field 'y' declared as both int and keyword");
        let missing = read_fields_file(Path::new("/nonexistent/fields.json")).unwrap_err();
        let source = std::error::Error::source(&missing).and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(source.map(std::io::Error::kind), Some(std::io::ErrorKind::NotFound));
    }
}
