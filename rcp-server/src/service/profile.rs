//! Per-revision capability profiles (§7.1, §13.2).
//!
//! A server speaks the protocol revisions of its [`Revisions`] table (RCP/1 alone unless a
//! test or an experiment adds one with [`crate::ServerBuilder::revision`]). Each [`Revision`]
//! says which capability keys it permits and whether it is stateless. The negotiated version is
//! resolved once per session into a [`Profile`]; a capability is advertised and acted on only
//! when the profile permits it *and* the server enables it. A capability the server enables but
//! the revision does not permit stays silently inactive: absent from `initialize`, `-32003` on
//! call, and no error at start-up.

use rcp_wire::capabilities::{Capabilities, Capability};
use rcp_wire::methods::Method;

/// The lowest protocol version this framework speaks.
pub(crate) const MIN_PROTOCOL_VERSION: u32 = 1;
/// The highest protocol version this framework speaks.
pub(crate) const MAX_PROTOCOL_VERSION: u32 = rcp_wire::PROTOCOL_VERSION;

/// A set of capability keys, one bit per entry of [`Capability::ALL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CapSet(u32);

impl CapSet {
    const ALL: Self = Self((1 << Capability::ALL.len()) - 1);

    fn bit(cap: Capability) -> u32 {
        Capability::ALL.iter().position(|c| *c == cap).map_or(0, |i| 1 << i)
    }

    fn of(caps: &[Capability]) -> Self {
        Self(caps.iter().fold(0, |acc, c| acc | Self::bit(*c)))
    }

    fn contains(self, cap: Capability) -> bool {
        self.0 & Self::bit(cap) != 0
    }
}

/// One protocol revision: its version number, the capability keys it permits and whether any
/// node may serve it without a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Revision {
    version: u32,
    permits: CapSet,
    stateless: bool,
}

impl Revision {
    /// RCP/1: every capability key of §6, served in sessions.
    pub const RCP1: Self = Self { version: 1, permits: CapSet::ALL, stateless: false };

    /// A revision numbered `version` permitting exactly `caps`, served in sessions. Meant for
    /// tests and experiments with revisions this framework does not ship.
    pub fn new(version: u32, caps: &[Capability]) -> Self {
        Self { version, permits: CapSet::of(caps), stateless: false }
    }

    /// This revision, marked stateless: nothing negotiated is kept between requests, so any
    /// node may answer any request (no session token is issued or needed).
    pub fn stateless(mut self) -> Self {
        self.stateless = true;
        self
    }

    /// The protocol version.
    pub fn version(self) -> u32 {
        self.version
    }
}

/// The revisions a server speaks, by version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revisions {
    /// Sorted by version, no duplicates, never empty.
    table: Vec<Revision>,
}

impl Default for Revisions {
    /// The revisions this framework ships: RCP/1.
    fn default() -> Self {
        Self { table: vec![Revision::RCP1] }
    }
}

impl Revisions {
    /// Adds `revision`, replacing any of the same version.
    pub fn insert(&mut self, revision: Revision) {
        self.table.retain(|r| r.version != revision.version);
        self.table.push(revision);
        self.table.sort_by_key(|r| r.version);
    }

    /// The lowest version spoken.
    pub fn min_version(&self) -> u32 {
        self.table.first().map_or(MIN_PROTOCOL_VERSION, |r| r.version)
    }

    /// The highest version spoken.
    pub fn max_version(&self) -> u32 {
        self.table.last().map_or(MAX_PROTOCOL_VERSION, |r| r.version)
    }

    /// The profile of `version`, or `None` if the table does not hold it.
    pub fn profile(&self, version: u32) -> Option<Profile> {
        self.table.iter().find(|r| r.version == version).map(|r| Profile { revision: *r })
    }

    /// The profile of the highest version spoken (what `info` reports before `initialize`).
    pub fn latest(&self) -> Profile {
        Profile { revision: self.table.last().copied().unwrap_or(Revision::RCP1) }
    }
}

/// What one negotiated revision permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    revision: Revision,
}

impl Profile {
    /// The profile of `version` among the revisions this framework ships, or `None` if it does
    /// not speak it.
    pub fn for_version(version: u32) -> Option<Self> {
        Revisions::default().profile(version)
    }

    /// The profile of the highest version this framework ships.
    pub fn latest() -> Self {
        Revisions::default().latest()
    }

    /// The protocol version.
    pub fn version(self) -> u32 {
        self.revision.version
    }

    /// Whether the revision is stateless (any node may serve it without a session).
    pub fn is_stateless(self) -> bool {
        self.revision.stateless
    }

    /// Whether this revision defines `cap`. RCP/1 defines every key of §6.
    pub fn permits(self, cap: Capability) -> bool {
        self.revision.permits.contains(cap)
    }

    /// Whether this revision defines `method`. Every revision spoken defines every method of
    /// §7; whether a method may be called is its capability's to say (`-32003` otherwise).
    pub fn permits_method(self, method: Method) -> bool {
        Method::ALL.contains(&method)
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
        assert!(!Profile::latest().is_stateless());
    }

    #[test]
    fn rcp1_permits_every_key_and_a_test_revision_only_its_own() {
        assert!(Capability::ALL.iter().all(|c| Revision::RCP1.permits.contains(*c)));
        let mut table = Revisions::default();
        table.insert(Revision::new(2, &[Capability::Retrieve]).stateless());
        let p = table.latest();
        assert_eq!((p.version(), table.min_version()), (2, 1));
        assert!(p.permits(Capability::Retrieve) && !p.permits(Capability::Embed) && p.is_stateless());
        assert_eq!(table.profile(1).map(Profile::permits_all), Some(true));
    }

    impl Profile {
        fn permits_all(self) -> bool {
            Capability::ALL.iter().all(|c| self.permits(*c))
        }
    }
}
