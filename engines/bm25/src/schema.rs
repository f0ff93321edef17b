//! The index layout in one place: the persisted configuration of a data directory (its
//! filterable fields and identity) and the tantivy schema derived from it.
//!
//! A data directory holds `rcp-bm25.json` (this configuration) and `index/` (tantivy). The
//! filterable fields are fixed when the index is created, because a tantivy schema cannot
//! change afterwards; `serve` reads them back so it advertises exactly what was indexed.

use std::collections::BTreeMap;
use std::path::Path;

use rcp_protocol::filter::FieldType;
use serde::{Deserialize, Serialize};
use tantivy::schema::{
    Field, IndexRecordOption, NumericOptions, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
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
    pub fn parse(spec: &str) -> Result<Self, String> {
        let (name, ty) = spec.rsplit_once(':').ok_or_else(|| format!("'{spec}' is not NAME:TYPE"))?;
        Self::new(name, FieldType::parse(ty))
    }

    /// A checked field: a non-empty name that is not the title, and a supported type.
    pub fn new(name: &str, ty: FieldType) -> Result<Self, String> {
        if name.is_empty() {
            return Err("a field name must not be empty".into());
        }
        if name == "title" {
            return Err("'title' is the document title (searched as text) and cannot be a filter field".into());
        }
        match ty {
            FieldType::Keyword
            | FieldType::Text
            | FieldType::Int
            | FieldType::Float
            | FieldType::Bool
            | FieldType::Date => Ok(Self { name: name.to_owned(), ty }),
            other => Err(format!("field '{name}': type '{other}' is not supported; use one of {SUPPORTED_TYPES}")),
        }
    }
}

/// Reads a fields file: a JSON object mapping name → type, the same shape as the advertised
/// `filter.fields` (§8), e.g. `{"year": "int", "lang": "keyword"}`.
pub fn read_fields_file(path: &Path) -> Result<Vec<FieldSpec>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let map: BTreeMap<String, String> = serde_json::from_str(&text)
        .map_err(|e| format!("{}: expected {{\"name\": \"type\", ...}}: {e}", path.display()))?;
    map.into_iter().map(|(name, ty)| FieldSpec::new(&name, FieldType::parse(&ty))).collect()
}

/// Merges field declarations, rejecting a name declared twice with different types.
pub fn merge_fields(specs: impl IntoIterator<Item = FieldSpec>) -> Result<Vec<FieldSpec>, String> {
    let mut out: Vec<FieldSpec> = Vec::new();
    for s in specs {
        match out.iter().find(|o| o.name == s.name) {
            Some(o) if o.ty != s.ty => {
                return Err(format!("field '{}' declared as both {} and {}", s.name, o.ty, s.ty));
            }
            Some(_) => {}
            None => out.push(s),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The persisted configuration of a data directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// Layout version of this file.
    pub format: u32,
    /// A random identity of this index, part of every `indexVersion` token, so a token from a
    /// rebuilt directory never names a snapshot of another index.
    pub uid: String,
    /// The filterable fields, in schema order.
    pub fields: Vec<FieldSpec>,
}

impl Config {
    /// A fresh configuration with these fields.
    pub fn new(fields: Vec<FieldSpec>) -> Self {
        let uid = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
        Self { format: 1, uid, fields }
    }

    /// Reads `DIR/rcp-bm25.json`; `None` when the directory holds no index yet.
    pub fn load(dir: &Path) -> Result<Option<Self>, EngineError> {
        let path = dir.join(CONFIG_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| EngineError::Config(format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(EngineError::Config(format!("{}: {e}", path.display()))),
        }
    }

    /// Writes `DIR/rcp-bm25.json` durably (temp file, fsync, rename).
    pub fn save(&self, dir: &Path) -> Result<(), EngineError> {
        use std::io::Write;
        let io = |e: std::io::Error| EngineError::Config(format!("{}: {e}", dir.display()));
        std::fs::create_dir_all(dir).map_err(io)?;
        let tmp = dir.join(format!("{CONFIG_FILE}.tmp"));
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        let text = serde_json::to_string_pretty(self).map_err(|e| EngineError::Config(e.to_string()))?;
        f.write_all(text.as_bytes()).and_then(|_| f.sync_all()).map_err(io)?;
        std::fs::rename(&tmp, dir.join(CONFIG_FILE)).map_err(io)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// The filter field map as advertised (§8).
    pub fn field_types(&self) -> Vec<(String, FieldType)> {
        self.fields.iter().map(|f| (f.name.clone(), f.ty.clone())).collect()
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
    let schema = b.build();
    (schema, Fields { id, title, text, title_raw, text_raw, meta, trust, source, present, arrays, filterable })
}
