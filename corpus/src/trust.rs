//! The provenance an engine records for each document it stores, which its hits carry as
//! `hit.trust.level` (§7.7, §15.2): the operator says how far a corpus it loads is trusted
//! (`--trust`, default `trusted`) and how far documents written with `index/add` are
//! (`--added-trust`, default `community`, never `trusted`).

/// The trust level of a stored document (`hit.trust.level`, §15.1, §15.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrustLevel {
    /// Curated by the operator.
    Trusted,
    /// Contributed by known users.
    Community,
    /// Unknown provenance.
    Untrusted,
}

impl TrustLevel {
    /// Every level, most trusted first.
    pub const ALL: [TrustLevel; 3] = [TrustLevel::Trusted, TrustLevel::Community, TrustLevel::Untrusted];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TrustLevel::Trusted => "trusted",
            TrustLevel::Community => "community",
            TrustLevel::Untrusted => "untrusted",
        }
    }

    /// The level of a wire name (`None` for an unknown one).
    pub fn from_wire(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// The level a document written with `index/add` gets when the operator set this one: a
    /// client's write is never `trusted` (§15.2: user-generated content MUST NOT be labelled
    /// so), so `trusted` is lowered to `community`.
    pub fn for_added(self) -> Self {
        match self {
            TrustLevel::Trusted => TrustLevel::Community,
            other => other,
        }
    }
}

impl std::fmt::Display for TrustLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TrustLevel {
    type Err = String;

    /// A level by its wire name, as a command-line flag takes it.
    fn from_str(s: &str) -> Result<Self, String> {
        Self::from_wire(s).ok_or_else(|| format!("'{s}' is not a trust level; use trusted, community or untrusted"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip_and_added_documents_are_never_trusted() {
        for level in TrustLevel::ALL {
            assert_eq!(TrustLevel::from_wire(level.as_str()), Some(level));
            assert_eq!(level.to_string().parse::<TrustLevel>(), Ok(level));
            assert_ne!(level.for_added(), TrustLevel::Trusted);
        }
        assert_eq!(TrustLevel::Trusted.for_added(), TrustLevel::Community);
        assert_eq!(TrustLevel::Untrusted.for_added(), TrustLevel::Untrusted);
        assert!("sure".parse::<TrustLevel>().is_err());
    }
}
