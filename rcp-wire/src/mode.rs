//! The retrieval mode (§6.1, §7.7): `dense`, `sparse` or `hybrid`, a plain string on the wire.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A retrieval mode: `retrieve.mode` (§7.7), `retrieve.modes` and `defaultMode` (§6.1).
///
/// The schema closes the set at `dense`, `sparse` and `hybrid`, but a peer may send any string.
/// A mode outside the set is kept verbatim as [`Mode::Other`] (it serialises back unchanged),
/// so the gate answers it the way it answers a known mode the server does not advertise:
/// `-32005` under `strict`, a noted fallback otherwise. On the wire a mode is a plain string.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// `dense`: vector similarity.
    Dense,
    /// `sparse`: term matching (BM25 and kin).
    Sparse,
    /// `hybrid`: dense and sparse lists fused (§7.7 `fusion`).
    Hybrid,
    /// A string outside the closed set, kept as sent. Build modes from strings with
    /// [`From`], which never puts one of the three above here.
    Other(String),
}

impl Mode {
    /// The wire string.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Dense => "dense",
            Self::Sparse => "sparse",
            Self::Hybrid => "hybrid",
            Self::Other(s) => s,
        }
    }

    fn known(s: &str) -> Option<Self> {
        match s {
            "dense" => Some(Self::Dense),
            "sparse" => Some(Self::Sparse),
            "hybrid" => Some(Self::Hybrid),
            _ => None,
        }
    }
}

/// The mode a wire string names; a string outside the set becomes [`Mode::Other`].
impl From<&str> for Mode {
    fn from(s: &str) -> Self {
        Self::known(s).unwrap_or_else(|| Self::Other(s.to_owned()))
    }
}

impl From<String> for Mode {
    fn from(s: String) -> Self {
        Self::known(&s).unwrap_or(Self::Other(s))
    }
}

impl std::str::FromStr for Mode {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self::from(s))
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Mode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Mode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Wire;
        impl serde::de::Visitor<'_> for Wire {
            type Value = Mode;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Mode, E> {
                Ok(Mode::from(s))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Mode, E> {
                Ok(Mode::from(s))
            }
        }
        d.deserialize_string(Wire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RetrieveParams;
    use serde_json::json;

    #[test]
    fn modes_are_strings_on_the_wire_and_unknown_ones_round_trip() {
        for (wire, mode) in [("dense", Mode::Dense), ("sparse", Mode::Sparse), ("hybrid", Mode::Hybrid)] {
            let p: RetrieveParams = serde_json::from_value(json!({"query": "q", "k": 1, "mode": wire})).unwrap();
            assert_eq!(p.mode.as_ref(), Some(&mode));
            assert_eq!(serde_json::to_value(&p).unwrap()["mode"], wire);
            assert_eq!(wire.parse::<Mode>(), Ok(mode));
        }
        let p: RetrieveParams = serde_json::from_str(r#"{"query":"q","k":1,"mode":"Late-Interaction"}"#).unwrap();
        assert_eq!(p.mode, Some(Mode::Other("Late-Interaction".into())));
        assert_eq!(serde_json::to_value(&p).unwrap()["mode"], "Late-Interaction");
        let e = serde_json::from_value::<RetrieveParams>(json!({"query": "q", "k": 1, "mode": 5})).unwrap_err();
        assert!(e.to_string().contains("expected a string"), "{e}");
    }
}
