//! Collection grants (§15.6): which collections, and so which engines, one caller reaches.
//!
//! A token may be limited to named collections (`read@fruit`, [`Grant`]). The gateway applies
//! the limit in the one place each kind of call decides where it goes: the fan-out of
//! `retrieve` asks only granted collections ([`Gateway::granted_collections`]); the calls that
//! go through [`super::forward::Relay`] (`graph`, `memory/*`, `feedback`, the routed methods)
//! see only the engines of granted collections and the reranking entry, which holds no
//! collection ([`Gateway::reaches_entry`]); `index/*` refuses a collection outside the grant
//! with `-32012`; `catalog/list` lists only what the caller reaches. What a caller is not
//! granted is never named to it: a collection it may not read answers as one with no hits.

use rcp_server::RequestContext;
use rcp_server::access::{Grant, Scope};
use rcp_wire::methods::Method;

use super::startup::{Collection, Gateway};

/// The scope a call of the method `ctx` serves needs: `write` for the methods that change what
/// is stored, else `read`.
pub(super) fn scope_of(ctx: &RequestContext) -> Scope {
    Method::from_name(ctx.method()).and_then(Scope::required_for).unwrap_or(Scope::Read)
}

impl Gateway {
    /// The collections `grant` reaches with `scope`, in registry order.
    pub(super) fn granted_collections<'g>(
        &'g self,
        grant: &'g Grant,
        scope: Scope,
    ) -> impl Iterator<Item = &'g Collection> + 'g {
        self.collections.iter().filter(move |c| grant.reaches(scope, &c.name))
    }

    /// Whether `grant` reaches registry entry `index` with `scope`: an entry of a granted
    /// collection, or the reranking entry (it holds no collection).
    pub(super) fn reaches_entry(&self, grant: &Grant, scope: Scope, index: usize) -> bool {
        match self.namespace_of(index) {
            Some(owner) => grant.reaches(scope, &self.collections[owner].name),
            None => grant.scopes().contains(scope),
        }
    }
}
