//! `query/transform` (§7.8) and inline `retrieve.rewrite` (§7.7) by pseudo-relevance feedback
//! over the engine's own index (RM3, see [`crate::engine::Rm3`]).
//!
//! Only the methods that need no language model are offered: `rewrite` (the query expanded
//! with the relevance model's terms) and `multi-query` (the expansion over all feedback
//! documents, then one expansion per top document). `hyde`, `decompose` and `step-back` are
//! not advertised, so the framework refuses them with `-32005`.

use rcp_wire::RcpError;
use rcp_wire::capabilities::TransformCapability;

use crate::engine::{Rewrite, Rm3};

/// The `rewrite` method: one expanded query.
pub const REWRITE: &str = "rewrite";
/// The `multi-query` method: several expanded queries.
pub const MULTI_QUERY: &str = "multi-query";
/// The methods offered, exactly those implemented.
pub const METHODS: [&str; 2] = [REWRITE, MULTI_QUERY];
/// How many queries `multi-query` makes when `n` is absent (inline, always).
pub const DEFAULT_VARIANTS: usize = 3;

/// The engine rewrite for `retrieve.rewrite`: `None` when absent or `false`; a method outside
/// [`METHODS`] is `-32005` (the framework refuses unadvertised ones before this runs).
pub fn inline(method: Option<&str>, rm3: &Rm3) -> Result<Option<Rewrite>, RcpError> {
    match method {
        None => Ok(None),
        Some(REWRITE) => Ok(Some(Rewrite::Rm3(*rm3))),
        Some(MULTI_QUERY) => Ok(Some(Rewrite::MultiQuery { rm3: *rm3, n: DEFAULT_VARIANTS })),
        Some(other) => Err(RcpError::option_unsupported("rewrite", other, &METHODS)),
    }
}

/// `multi-query` makes at most one variant per feedback document plus the full expansion.
fn variants_wanted(n: Option<u32>, rm3: &Rm3) -> usize {
    n.map_or(DEFAULT_VARIANTS, |n| n as usize).clamp(1, rm3.fb_docs + 1)
}

/// The `transform` capability: exactly [`METHODS`].
pub fn capability() -> TransformCapability {
    TransformCapability { methods: METHODS.map(String::from).to_vec(), ..Default::default() }
}

/// How many expanded queries `query/transform` with `method` and `n` makes; a method outside
/// [`METHODS`] is `-32005`.
pub fn variants_for(method: &str, n: Option<u32>, rm3: &Rm3) -> Result<usize, RcpError> {
    match method {
        REWRITE => Ok(1),
        MULTI_QUERY => Ok(variants_wanted(n, rm3)),
        other => Err(RcpError::option_unsupported("method", other, &METHODS)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_rewrite_maps_methods() {
        let rm3 = Rm3::default();
        assert_eq!(inline(None, &rm3).ok(), Some(None));
        assert_eq!(inline(Some("rewrite"), &rm3).ok(), Some(Some(Rewrite::Rm3(rm3))));
        let e = inline(Some("hyde"), &rm3).err();
        assert_eq!(e.map(|e| e.code.0), Some(-32005));
    }

    #[test]
    fn variant_count_is_bounded_by_feedback_documents() {
        let rm3 = Rm3 { fb_docs: 2, ..Rm3::default() };
        assert_eq!(variants_wanted(None, &rm3), 3);
        assert_eq!(variants_wanted(Some(50), &rm3), 3);
        assert_eq!(variants_wanted(Some(1), &Rm3::default()), 1);
    }
}
