//! Content blocks and modalities (§4.8).

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
    /// A block type outside `text`, `image`, `audio` and `blob`.
    #[error("unknown block type '{kind}'; expected text, image, audio or blob")]
    UnknownType {
        /// The block type as sent.
        kind: String,
    },
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
}
