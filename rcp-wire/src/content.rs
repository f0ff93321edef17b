//! Content blocks and modalities (§4.8).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

/// A tagged content block: a query, passage or document body (§4.8).
///
/// `type` is `"text"`, `"image"`, `"audio"` or `"blob"`; a text block carries `text`, any
/// other block carries a `mimeType` and either inline base64 `data` or a `uri`, never both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Content {
    /// Block type: `text`, `image`, `audio` or `blob`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Body of a `text` block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// MIME type; required for non-text blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Inline base64 payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// Payload by reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}

impl Content {
    /// A `text` block.
    pub fn text(text: impl Into<String>) -> Self {
        Self { kind: "text".into(), text: Some(text.into()), mime_type: None, data: None, uri: None }
    }

    /// The modality this block belongs to (`text` for text blocks, else the block type,
    /// with `blob` mapped through its MIME type's top-level kind when that is image/audio).
    pub fn modality(&self) -> &str {
        match self.kind.as_str() {
            "text" => "text",
            "image" => "image",
            "audio" => "audio",
            _ => match self.mime_type.as_deref().and_then(|m| m.split('/').next()) {
                Some("image") => "image",
                Some("audio") => "audio",
                Some("text") => "text",
                _ => "multimodal",
            },
        }
    }

    /// Checks the structural rules of §4.8; the error names the first violation.
    pub fn check(&self) -> Result<(), BlockError> {
        let kind = || self.kind.clone();
        match self.kind.as_str() {
            "text" => {
                if self.text.is_none() {
                    return Err(BlockError::MissingText);
                }
            }
            "image" | "audio" | "blob" => {
                if self.mime_type.is_none() {
                    return Err(BlockError::MissingMimeType { kind: kind() });
                }
                match (&self.data, &self.uri) {
                    (Some(_), Some(_)) => return Err(BlockError::DataAndUri),
                    (None, None) => return Err(BlockError::NoPayload { kind: kind() }),
                    _ => {}
                }
            }
            _ => return Err(BlockError::UnknownType { kind: kind() }),
        }
        Ok(())
    }

    /// The block as a server that fetches nothing reads it (§4.8): checked ([`Content::check`]),
    /// then a block of a text MIME type carrying inline `data` becomes the `text` block of its
    /// decoded string, so it is searched exactly as that string would be. A block by `uri` is
    /// refused ([`BlockError::UriNotFetched`]) rather than silently read as nothing; any other
    /// block is returned as it is, for the modality check to judge.
    pub fn inline(self) -> Result<Self, BlockError> {
        self.check()?;
        if self.uri.is_some() {
            return Err(BlockError::UriNotFetched);
        }
        match (&self.data, self.mime_type.as_deref()) {
            (Some(data), Some(mime)) if is_text_mime(mime) => match decode_text(data, mime)? {
                text if text.trim().is_empty() => Err(BlockError::Empty),
                text => Ok(Self::text(text)),
            },
            _ => Ok(self),
        }
    }
}

/// Whether a MIME type is of the `text` modality (`text/plain`, `text/markdown; charset=utf-8`, ...).
fn is_text_mime(mime: &str) -> bool {
    mime.split(';').next().and_then(|m| m.trim().split('/').next()).is_some_and(|t| t.eq_ignore_ascii_case("text"))
}

/// The text of a base64 `data` payload of a text MIME type: UTF-8 (or its subset US-ASCII),
/// the only charsets read; a leading byte-order mark is dropped.
fn decode_text(data: &str, mime: &str) -> Result<String, BlockError> {
    let charset = mime.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim().eq_ignore_ascii_case("charset").then(|| value.trim().trim_matches('"').to_ascii_lowercase())
    });
    if let Some(c) = charset
        && !matches!(c.as_str(), "utf-8" | "utf8" | "us-ascii")
    {
        return Err(BlockError::UnreadableText(format!("charset '{c}' is not read; send UTF-8")));
    }
    let bytes =
        STANDARD.decode(data.trim()).map_err(|e| BlockError::UnreadableText(format!("'data' is not base64: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|e| BlockError::UnreadableText(format!("'data' is not UTF-8: {e}")))?;
    Ok(text.strip_prefix('\u{feff}').map(str::to_owned).unwrap_or(text))
}

/// A content block that breaks a structural rule of §4.8 (see [`Content::check`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BlockError {
    /// A `text` block without `text`.
    #[error("a text block must carry 'text'")]
    MissingText,
    /// A media block without `mimeType`.
    #[error("a {kind} block must carry 'mimeType'")]
    MissingMimeType {
        /// The block type.
        kind: String,
    },
    /// A media block with both `data` and `uri`.
    #[error("a block carries 'data' or 'uri', never both")]
    DataAndUri,
    /// A media block with neither `data` nor `uri`.
    #[error("a {kind} block must carry 'data' or 'uri'")]
    NoPayload {
        /// The block type.
        kind: String,
    },
    /// An empty query: a blank string, no blocks, or text `data` that decodes to nothing.
    #[error("query must not be empty")]
    Empty,
    /// A block by `uri`, which this server does not fetch (§4.8: `-32602`, never ignored).
    #[error("'uri' is not fetched by this server; send the content inline as base64 'data'")]
    UriNotFetched,
    /// Inline `data` of a text MIME type that does not decode to text.
    #[error("{0}")]
    UnreadableText(String),
    /// A block type outside `text`, `image`, `audio` and `blob`.
    #[error("unknown block type '{kind}'; expected text, image, audio or blob")]
    UnknownType {
        /// The block type as sent.
        kind: String,
    },
}

impl BlockError {
    /// Where the error lies, under the block's own path: its `uri` or `data` field, or the
    /// block itself.
    fn path(&self, block: &str) -> String {
        match self {
            Self::UriNotFetched => format!("{block}.uri"),
            Self::UnreadableText(_) => format!("{block}.data"),
            _ => block.to_owned(),
        }
    }
}

/// A query or passage: a bare string, one block, or an array of blocks (§4.8).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum QueryInput {
    /// A bare string, equivalent to one text block.
    Text(String),
    /// A single content block.
    Block(Content),
    /// Several blocks (a `multimodal` query when their types differ).
    Blocks(Vec<Content>),
}

impl QueryInput {
    /// The blocks of this input, a bare string becoming one text block.
    pub fn blocks(&self) -> Vec<Content> {
        match self {
            Self::Text(t) => vec![Content::text(t.clone())],
            Self::Block(b) => vec![b.clone()],
            Self::Blocks(bs) => bs.clone(),
        }
    }

    /// The input as a server that fetches nothing reads it ([`Content::inline`] on each block);
    /// the error names the offending block's path under `field` (`query`, `query[1]`) and what
    /// is wrong. An empty query (a blank string, no blocks) is refused too.
    pub fn inline(self, field: &str) -> Result<Self, (String, BlockError)> {
        match self {
            Self::Text(t) if t.trim().is_empty() => Err((field.to_owned(), BlockError::Empty)),
            Self::Text(t) => Ok(Self::Text(t)),
            Self::Block(b) => b.inline().map(Self::Block).map_err(|e| (e.path(field), e)),
            Self::Blocks(bs) if bs.is_empty() => Err((field.to_owned(), BlockError::Empty)),
            Self::Blocks(bs) => bs
                .into_iter()
                .enumerate()
                .map(|(i, b)| b.inline().map_err(|e| (e.path(&format!("{field}[{i}]")), e)))
                .collect::<Result<_, _>>()
                .map(Self::Blocks),
        }
    }

    /// The concatenated text of all text blocks (the whole string for a bare string).
    pub fn text(&self) -> String {
        match self {
            Self::Text(t) => t.clone(),
            Self::Block(b) => b.text.clone().unwrap_or_default(),
            Self::Blocks(bs) => bs.iter().filter_map(|b| b.text.as_deref()).collect::<Vec<_>>().join("\n"),
        }
    }

    /// The modality of the input: the single modality of its blocks, or `multimodal`.
    pub fn modality(&self) -> &str {
        match self {
            Self::Text(_) => "text",
            Self::Block(b) => b.modality(),
            Self::Blocks(bs) => {
                let mut it = bs.iter().map(Content::modality);
                match it.next() {
                    None => "text",
                    Some(first) if it.all(|m| m == first) => first,
                    Some(_) => "multimodal",
                }
            }
        }
    }
}

impl From<&str> for QueryInput {
    fn from(s: &str) -> Self {
        Self::Text(s.to_owned())
    }
}

impl From<String> for QueryInput {
    fn from(s: String) -> Self {
        Self::Text(s)
    }
}

/// One item of an `inputs`/`passages` array: a bare string or one content block (§4.8).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum InputItem {
    /// A bare string.
    Text(String),
    /// A content block.
    Block(Content),
}

impl InputItem {
    /// The item as a server that fetches nothing reads it ([`Content::inline`]); the error
    /// names the item's path (`passages[2]`, `passages[2].uri`).
    pub fn inline(self, field: &str, index: usize) -> Result<Self, (String, BlockError)> {
        match self {
            Self::Text(t) => Ok(Self::Text(t)),
            Self::Block(b) => b.inline().map(Self::Block).map_err(|e| (e.path(&format!("{field}[{index}]")), e)),
        }
    }

    /// The text of the item (empty for a non-text block).
    pub fn text(&self) -> &str {
        match self {
            Self::Text(t) => t,
            Self::Block(b) => b.text.as_deref().unwrap_or(""),
        }
    }

    /// The modality of the item.
    pub fn modality(&self) -> &str {
        match self {
            Self::Text(_) => "text",
            Self::Block(b) => b.modality(),
        }
    }
}

impl From<&str> for InputItem {
    fn from(s: &str) -> Self {
        Self::Text(s.to_owned())
    }
}

impl From<String> for InputItem {
    fn from(s: String) -> Self {
        Self::Text(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn query_input_shapes() {
        let s: QueryInput = serde_json::from_value(json!("hi")).unwrap();
        assert_eq!(s.text(), "hi");
        let b: QueryInput = serde_json::from_value(json!({"type":"image","mimeType":"image/png","uri":"x"})).unwrap();
        assert_eq!(b.modality(), "image");
        let m: QueryInput = serde_json::from_value(
            json!([{"type":"text","text":"a"},{"type":"image","mimeType":"image/png","data":"AA=="}]),
        )
        .unwrap();
        assert_eq!(m.modality(), "multimodal");
    }

    #[test]
    fn block_rules() {
        assert!(Content::text("x").check().is_ok());
        let both = Content {
            kind: "image".into(),
            text: None,
            mime_type: Some("image/png".into()),
            data: Some("A".into()),
            uri: Some("u".into()),
        };
        assert_eq!(both.check(), Err(BlockError::DataAndUri));
        let no_mime = Content { kind: "audio".into(), text: None, mime_type: None, data: Some("A".into()), uri: None };
        assert_eq!(no_mime.check(), Err(BlockError::MissingMimeType { kind: "audio".into() }));
        assert_eq!(no_mime.check().unwrap_err().to_string(), "a audio block must carry 'mimeType'");
    }

    #[test]
    fn inline_decodes_text_data_and_refuses_uris() {
        let blob = |mime: &str, data: Option<&str>, uri: Option<&str>| Content {
            kind: "blob".into(),
            text: None,
            mime_type: Some(mime.into()),
            data: data.map(str::to_owned),
            uri: uri.map(str::to_owned),
        };
        // "héllo" in UTF-8 with a byte-order mark, base64.
        let data = STANDARD.encode("\u{feff}héllo");
        assert_eq!(blob("text/plain", Some(&data), None).inline(), Ok(Content::text("héllo")));
        assert_eq!(blob("Text/CSV; charset=\"utf-8\"", Some(&data), None).inline(), Ok(Content::text("héllo")));
        assert!(matches!(
            blob("text/plain; charset=latin1", Some(&data), None).inline(),
            Err(BlockError::UnreadableText(m)) if m.contains("latin1")
        ));
        assert!(matches!(blob("text/plain", Some("@@"), None).inline(), Err(BlockError::UnreadableText(_))));
        assert_eq!(blob("text/plain", None, Some("file:///q.txt")).inline(), Err(BlockError::UriNotFetched));
        assert_eq!(blob("image/png", None, Some("https://x/p.png")).inline(), Err(BlockError::UriNotFetched));
        // A media block inline stays as it is, for the modality rule to judge.
        let png = blob("image/png", Some("AA=="), None);
        assert_eq!(png.clone().inline(), Ok(png));

        let q = QueryInput::Blocks(vec![Content::text("a"), blob("text/plain", None, Some("u"))]);
        let (path, e) = q.inline("query").expect_err("uri");
        assert_eq!((path.as_str(), e), ("query[1].uri", BlockError::UriNotFetched));
        let (path, _) = QueryInput::Text(" ".into()).inline("query").expect_err("blank");
        assert_eq!(path, "query");
        let item = InputItem::Block(blob("text/plain", Some("@@"), None));
        assert_eq!(item.inline("passages", 2).expect_err("bad").0, "passages[2].data");
    }
}
