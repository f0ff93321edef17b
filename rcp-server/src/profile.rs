//! Per-revision capability profiles (§7.1, §13.2).
//!
//! The negotiated protocol version is resolved once per session into a [`Profile`]: the set of
//! capabilities and methods that revision permits. A capability is advertised and acted on only
//! when the profile permits it *and* the server enables it.

use rcp_protocol::capabilities::{Capabilities, Capability};
use rcp_protocol::methods::Method;

/// The lowest protocol version this framework speaks.
pub(crate) const MIN_PROTOCOL_VERSION: u32 = 1;
/// The highest protocol version this framework speaks.
pub(crate) const MAX_PROTOCOL_VERSION: u32 = rcp_protocol::PROTOCOL_VERSION;

/// What one protocol revision permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    version: u32,
}

impl Profile {
    /// The profile of `version`, or `None` if this framework does not speak it.
    pub fn for_version(version: u32) -> Option<Self> {
        (MIN_PROTOCOL_VERSION..=MAX_PROTOCOL_VERSION).contains(&version).then_some(Self { version })
    }

    /// The profile of the highest version spoken (what `info` reports before `initialize`).
    pub fn latest() -> Self {
        Self { version: MAX_PROTOCOL_VERSION }
    }

    /// The protocol version.
    pub fn version(self) -> u32 {
        self.version
    }

    /// Whether this revision defines `cap`. RCP/1 defines every key of §6.
    pub fn permits(self, cap: Capability) -> bool {
        match self.version {
            1 => Capability::ALL.contains(&cap),
            _ => false,
        }
    }

    /// Whether this revision defines `method`. RCP/1 defines every method of §7.
    pub fn permits_method(self, method: Method) -> bool {
        match self.version {
            1 => Method::ALL.contains(&method),
            _ => false,
        }
    }

    /// `caps` narrowed to what this revision permits; extension keys pass through (§6.2).
    pub fn apply(self, caps: &Capabilities) -> Capabilities {
        let mut out = caps.clone();
        for cap in Capability::ALL {
            if !self.permits(cap) {
                out.remove(cap);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_versions_have_profiles() {
        assert!(Profile::for_version(0).is_none());
        assert_eq!(Profile::for_version(1).map(Profile::version), Some(1));
        assert!(Profile::for_version(MAX_PROTOCOL_VERSION + 1).is_none());
        assert!(Profile::latest().permits(Capability::Retrieve));
    }
}
