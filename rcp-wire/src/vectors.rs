//! Compact vector encoding (§7.3.1): the `json` and `f32-base64` wire encodings of dense
//! vectors.
//!
//! `f32-base64` is each component as a little-endian IEEE-754 `binary32`, concatenated and
//! base64-encoded with the standard alphabet and padding (RFC 4648 §4). A receiver rejects
//! a blob whose decoded length is not exactly `dimension × 4` bytes with `-32602`.

#![allow(clippy::result_large_err, reason = "RcpError is the protocol error type this API is specified to return")]

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use crate::error::RcpError;

/// The field path [`decode_f32_base64`] reports in `error.data.field` (§7.3.1, §12.1).
pub const DEFAULT_FIELD: &str = "vectors";

/// A vector wire encoding (§7.3.1): `"json"` (the default, always supported) or
/// `"f32-base64"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Encoding {
    /// `"json"`: an array of JSON numbers (§7.3.1). Always supported.
    #[default]
    #[serde(rename = "json")]
    Json,
    /// `"f32-base64"`: little-endian `binary32` components, base64 with padding (§7.3.1).
    #[serde(rename = "f32-base64")]
    F32Base64,
}

impl Encoding {
    /// Every encoding defined by §7.3.1, in spec order.
    pub const ALL: [Encoding; 2] = [Encoding::Json, Encoding::F32Base64];

    /// The wire name (§7.3.1): `"json"` or `"f32-base64"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Json => "json",
            Encoding::F32Base64 => "f32-base64",
        }
    }

    /// Parses a wire name (§7.3.1; case-sensitive per §4.6). `None` for an unknown name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "json" => Some(Encoding::Json),
            "f32-base64" => Some(Encoding::F32Base64),
            _ => None,
        }
    }

    /// Chooses the encoding to answer with (§7.3.1, §7.7 `strict`).
    ///
    /// `requested` is the request's `encoding` (absent means `json`); `advertised` the
    /// server's advertised `encodings` (`json` is always implied). An unknown or
    /// unadvertised request is `-32005` with `error.data.option = "encoding"` when `strict`,
    /// and degrades to [`Encoding::Json`] otherwise (the caller should note the degradation).
    pub fn select(requested: Option<&str>, advertised: &[&str], strict: bool) -> Result<Self, RcpError> {
        let Some(name) = requested else {
            return Ok(Encoding::Json);
        };
        match Encoding::parse(name) {
            Some(Encoding::Json) => Ok(Encoding::Json),
            Some(enc) if advertised.contains(&enc.as_str()) => Ok(enc),
            _ if !strict => Ok(Encoding::Json),
            _ => {
                let mut allowed: Vec<&str> = vec!["json"];
                allowed.extend(advertised.iter().copied().filter(|a| *a != "json" && Encoding::parse(a).is_some()));
                Err(RcpError::option_unsupported("encoding", name, &allowed))
            }
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Encodes a vector as `f32-base64` (§7.3.1): little-endian `binary32` components,
/// concatenated, standard base64 with padding.
pub fn encode_f32_base64(vector: &[f32]) -> String {
    let mut bytes = Vec::with_capacity(vector.len() * 4);
    for x in vector {
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    STANDARD.encode(bytes)
}

/// Decodes an `f32-base64` blob of `dimension` components (§7.3.1), reporting errors at the
/// field path [`DEFAULT_FIELD`] (`"vectors"`). See [`decode_f32_base64_at`].
pub fn decode_f32_base64(blob: &str, dimension: usize) -> Result<Vec<f32>, RcpError> {
    decode_f32_base64_at(blob, dimension, DEFAULT_FIELD)
}

/// Decodes an `f32-base64` blob of `dimension` components (§7.3.1).
///
/// Invalid base64 (wrong alphabet, missing or misplaced padding, non-canonical trailing
/// bits) and a decoded length other than `dimension × 4` bytes are both `-32602` with
/// `error.data.field = field` (e.g. `"vectors[3]"`).
pub fn decode_f32_base64_at(blob: &str, dimension: usize, field: &str) -> Result<Vec<f32>, RcpError> {
    let Some(expected_bytes) = dimension.checked_mul(4) else {
        return Err(RcpError::invalid_params(field, format!("dimension {dimension} is too large")));
    };
    // Padded base64 has a fixed length for a given byte count: a mismatch is an error, and
    // an oversized blob is rejected without decoding it.
    let expected_chars = expected_bytes.div_ceil(3).saturating_mul(4);
    if blob.len() != expected_chars {
        if blob.len() > expected_chars.saturating_mul(2).saturating_add(64) {
            return Err(RcpError::invalid_params(
                field,
                format!("f32-base64 blob has {} characters; dimension {dimension} needs {expected_chars}", blob.len()),
            ));
        }
        let bytes = STANDARD.decode(blob).map_err(|e| invalid_base64(field, &e))?;
        return Err(length_mismatch(field, bytes.len(), expected_bytes));
    }
    let bytes = STANDARD.decode(blob).map_err(|e| invalid_base64(field, &e))?;
    if bytes.len() != expected_bytes {
        return Err(length_mismatch(field, bytes.len(), expected_bytes));
    }
    Ok(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// Decodes a batch of `f32-base64` blobs (§7.3.1), reporting the first bad blob at
/// `"{field}[i]"` (e.g. `"vectors[3]"`).
pub fn decode_f32_base64_batch<S: AsRef<str>>(
    blobs: &[S],
    dimension: usize,
    field: &str,
) -> Result<Vec<Vec<f32>>, RcpError> {
    blobs
        .iter()
        .enumerate()
        .map(|(i, b)| decode_f32_base64_at(b.as_ref(), dimension, &format!("{field}[{i}]")))
        .collect()
}

fn length_mismatch(field: &str, got: usize, expected: usize) -> RcpError {
    RcpError::invalid_params(
        field,
        format!("f32-base64 blob decodes to {got} bytes; expected dimension × 4 = {expected} bytes"),
    )
}

fn invalid_base64(field: &str, e: &base64::DecodeError) -> RcpError {
    RcpError::invalid_params(field, format!("invalid base64 (RFC 4648 §4, padded): {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn known_vectors_match_hand_computed_base64() {
        // 1.0f32 = 0x3F800000 -> LE bytes 00 00 80 3F.
        assert_eq!(encode_f32_base64(&[1.0]), "AACAPw==");
        // -2.0f32 = 0xC0000000 -> 00 00 00 C0; with 1.0: 00 00 80 3F 00 00 00 C0.
        assert_eq!(encode_f32_base64(&[1.0, -2.0]), "AACAPwAAAMA=");
        // Three components: 12 bytes, no padding. 0.5 = 0x3F000000.
        assert_eq!(encode_f32_base64(&[0.0, 0.5, 1.0]), "AAAAAAAAAD8AAIA/");
        assert_eq!(encode_f32_base64(&[]), "");
        assert_eq!(decode_f32_base64("AACAPw==", 1).unwrap(), vec![1.0]);
        assert_eq!(decode_f32_base64("AACAPwAAAMA=", 2).unwrap(), vec![1.0, -2.0]);
        assert_eq!(decode_f32_base64("", 0).unwrap(), Vec::<f32>::new());
    }

    #[test]
    fn round_trips_special_values_bit_exactly() {
        let v = [
            0.0,
            -0.0,
            f32::MIN_POSITIVE,
            f32::from_bits(1),            // smallest subnormal
            -f32::from_bits(0x007f_ffff), // largest negative subnormal
            f32::MAX,
            f32::MIN,
            f32::EPSILON,
            std::f32::consts::PI,
            -1.5e-30,
        ];
        let back = decode_f32_base64(&encode_f32_base64(&v), v.len()).unwrap();
        assert_eq!(bits(&back), bits(&v));
        // -0.0 keeps its sign bit.
        assert!(back[1].is_sign_negative());
    }

    #[test]
    fn round_trips_pseudo_random_vectors_of_every_padding_class() {
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        for dim in [1usize, 2, 3, 4, 5, 7, 64, 383, 1024] {
            let v: Vec<f32> = (0..dim)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state as u32 as f32 / u32::MAX as f32) * 2.0 - 1.0
                })
                .collect();
            let s = encode_f32_base64(&v);
            assert_eq!(s.len(), (dim * 4).div_ceil(3) * 4);
            assert_eq!(bits(&decode_f32_base64(&s, dim).unwrap()), bits(&v));
        }
    }

    #[test]
    fn wrong_length_is_invalid_params_with_the_field() {
        let s = encode_f32_base64(&[1.0, 2.0, 3.0]);
        for dim in [0, 2, 4, 1000] {
            let e = decode_f32_base64_at(&s, dim, "vectors[3]").unwrap_err();
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
            assert_eq!(e.field(), Some("vectors[3]"));
        }
        // Same encoded length class but a different byte count: 5 bytes vs 4 expected.
        let e = decode_f32_base64("AAAAAAA=", 1).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(e.field(), Some("vectors"));
        // 4-byte multiple but not dimension × 4.
        let e = decode_f32_base64("AACAPw==", 2).unwrap_err();
        assert!(e.message.contains("8 bytes"), "{}", e.message);
        assert!(e.message.contains("4 bytes"), "{}", e.message);
        // Absurd dimension does not overflow or panic.
        assert_eq!(decode_f32_base64("", usize::MAX).unwrap_err().code, ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn invalid_base64_is_invalid_params() {
        for bad in ["AACAP!==", "AACAPw", "AACAPw=", "AAC APw==", "AACAPx==", "AACA-w==", "====", "AACAPw==\n"] {
            let e = decode_f32_base64_at(bad, 1, "hits[0].vector").unwrap_err();
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{bad:?}");
            assert_eq!(e.field(), Some("hits[0].vector"), "{bad:?}");
        }
        // A long garbage string is rejected without panicking.
        let long = "!".repeat(10_000);
        assert_eq!(decode_f32_base64(&long, 1).unwrap_err().code, ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn batch_reports_the_index() {
        let good = encode_f32_base64(&[1.0, 2.0]);
        let out = decode_f32_base64_batch(&[good.clone(), good.clone()], 2, "vectors").unwrap();
        assert_eq!(out, vec![vec![1.0, 2.0], vec![1.0, 2.0]]);
        let e = decode_f32_base64_batch(&[good.as_str(), good.as_str(), "AACAPw=="], 2, "vectors").unwrap_err();
        assert_eq!(e.field(), Some("vectors[2]"));
    }

    #[test]
    fn encoding_names_round_trip() {
        for enc in Encoding::ALL {
            assert_eq!(Encoding::parse(enc.as_str()), Some(enc));
            let v = serde_json::to_value(enc).unwrap();
            assert_eq!(v, serde_json::Value::String(enc.to_string()));
            assert_eq!(serde_json::from_value::<Encoding>(v).unwrap(), enc);
        }
        assert_eq!(Encoding::parse("F32-BASE64"), None);
        assert_eq!(Encoding::parse("f16-base64"), None);
        assert!(serde_json::from_str::<Encoding>("\"bf16\"").is_err());
        assert_eq!(Encoding::default(), Encoding::Json);
    }

    #[test]
    fn select_honours_advertisement_and_strict() {
        let adv = ["json", "f32-base64"];
        assert_eq!(Encoding::select(None, &[], true).unwrap(), Encoding::Json);
        assert_eq!(Encoding::select(Some("json"), &[], true).unwrap(), Encoding::Json);
        assert_eq!(Encoding::select(Some("f32-base64"), &adv, true).unwrap(), Encoding::F32Base64);
        let e = Encoding::select(Some("f32-base64"), &["json"], true).unwrap_err();
        assert_eq!(e.code, ErrorCode::OPTION_UNSUPPORTED);
        assert_eq!(e.option(), Some("encoding"));
        assert_eq!(Encoding::select(Some("f32-base64"), &["json"], false).unwrap(), Encoding::Json);
        let e = Encoding::select(Some("bf16"), &adv, true).unwrap_err();
        assert!(e.message.contains("json, f32-base64"), "{}", e.message);
        assert_eq!(Encoding::select(Some("bf16"), &adv, false).unwrap(), Encoding::Json);
    }
}
