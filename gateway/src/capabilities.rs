//! What a federation can promise (§16.4), computed from its engines' own `initialize`.
//!
//! Where every engine must agree for a request to work everywhere, the gateway advertises the
//! intersection (filter fields and operators, query modalities, `deterministic`, `citations`);
//! where the gateway routes a request only to the engines that can serve it, the union
//! (`modes`: an engine lacking the requested mode is skipped with a note). `maxK` is the
//! largest downstream `maxK`: fusion can return that many. Fusion strategies are the gateway's
//! own (§16.3).

use std::collections::BTreeMap;

use rcp_wire::capabilities::{Capabilities, RetrieveCapability};
use rcp_wire::filter::{FieldType, FilterCapability, FilterFields};

/// The federated `retrieve` capability and its companions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FederatedRetrieve {
    /// `retrieve` (§6.1).
    pub retrieve: RetrieveCapability,
    /// `filter` (§8): only when every engine filters, over the fields they all share.
    pub filter: Option<FilterCapability>,
    /// `citations`: only when every engine's hits carry them.
    pub citations: bool,
}

/// The fusion strategies the gateway itself implements (§16.3).
pub const FUSION_METHODS: [&str; 3] = ["rrf", "weighted", "convex"];

/// Federates the capabilities of the engines that advertise `retrieve`; `None` if none does.
pub fn federate_retrieve(engines: &[&Capabilities]) -> Option<FederatedRetrieve> {
    let retrievers: Vec<&Capabilities> = engines.iter().copied().filter(|c| c.retrieve.is_some()).collect();
    let first = retrievers.first()?;
    let rcs: Vec<&RetrieveCapability> = retrievers.iter().filter_map(|c| c.retrieve.as_ref()).collect();
    let max_k = rcs.iter().map(|r| r.max_k).try_fold(0u64, |acc, m| m.map(|m| acc.max(m)));
    let mut modes: Vec<rcp_wire::Mode> = Vec::new();
    for m in rcs.iter().filter_map(|r| r.modes.as_ref()).flatten() {
        if !modes.contains(m) {
            modes.push(m.clone());
        }
    }
    let modalities = intersect_lists(rcs.iter().map(|r| r.modalities.clone()));
    let deterministic = rcs.iter().all(|r| r.deterministic == Some(true)).then_some(true);
    let retrieve = RetrieveCapability {
        max_k,
        modes: (!modes.is_empty()).then_some(modes),
        modalities,
        fusion: Some(FUSION_METHODS.map(String::from).to_vec()),
        deterministic,
        ..RetrieveCapability::default()
    };
    let filter = first
        .filter
        .clone()
        .and_then(|f0| retrievers.iter().try_fold(f0, |acc, c| intersect_filter(&acc, c.filter.as_ref()?)))
        .filter(|f| !f.fields.names().is_empty());
    let citations = retrievers.iter().all(|c| c.citations.is_some());
    Some(FederatedRetrieve { retrieve, filter, citations })
}

/// The filter every engine accepts: fields present in both (typed when both agree on the
/// type, untyped when either is untyped, dropped when the types conflict) and operators both
/// allow.
fn intersect_filter(a: &FilterCapability, b: &FilterCapability) -> Option<FilterCapability> {
    let mut typed: BTreeMap<String, FieldType> = BTreeMap::new();
    let mut untyped: Vec<String> = Vec::new();
    for name in a.fields.names() {
        match (a.fields.get(name), b.fields.get(name)) {
            (Some(Some(ta)), Some(Some(tb))) if ta == tb => {
                typed.insert(name.to_owned(), ta.clone());
            }
            (Some(Some(_)), Some(Some(_))) | (_, None) | (None, _) => {}
            (Some(_), Some(_)) => untyped.push(name.to_owned()),
        }
    }
    let fields = if untyped.is_empty() {
        FilterFields::Typed(typed)
    } else {
        untyped.extend(typed.into_keys());
        untyped.sort();
        FilterFields::Names(untyped)
    };
    let operators = match (&a.operators, &b.operators) {
        (None, None) => None,
        (Some(x), None) | (None, Some(x)) => Some(x.clone()),
        (Some(x), Some(y)) => Some(x.iter().filter(|o| y.contains(o)).cloned().collect()),
    };
    Some(FilterCapability { fields, operators, extra: Default::default() })
}

/// The intersection of optional lists, where `None` means "the default" and is neutral only
/// when every list is `None`.
fn intersect_lists(lists: impl Iterator<Item = Option<Vec<String>>>) -> Option<Vec<String>> {
    let mut acc: Option<Vec<String>> = None;
    let mut any_default = false;
    for l in lists {
        match l {
            None => any_default = true,
            Some(l) => acc = Some(acc.map_or(l.clone(), |a| a.into_iter().filter(|x| l.contains(x)).collect())),
        }
    }
    // An engine on the default (text only) limits everyone to text.
    match (acc, any_default) {
        (Some(a), true) => Some(a.into_iter().filter(|m| m == "text").collect()),
        (a, _) => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn caps(v: serde_json::Value) -> Capabilities {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn filter_fields_intersect_and_modes_unite() {
        let a = caps(json!({
            "retrieve": {"maxK": 100, "modes": ["sparse"]},
            "filter": {"fields": {"year": "int", "topic": "keyword", "lang": "keyword"}},
            "citations": {}
        }));
        let b = caps(json!({
            "retrieve": {"maxK": 500, "modes": ["dense"]},
            "filter": {"fields": {"year": "int", "topic": "text"}, "operators": ["eq", "gte"]}
        }));
        let embed_only = caps(json!({"embed": {"dimension": 2, "identity": "x"}}));
        let f = federate_retrieve(&[&a, &b, &embed_only]).unwrap();
        assert_eq!(f.retrieve.max_k, Some(500));
        assert_eq!(f.retrieve.modes, Some(vec![rcp_wire::Mode::Sparse, rcp_wire::Mode::Dense]));
        let filter = f.filter.unwrap();
        assert_eq!(filter.fields.names(), ["year"], "conflicting types and missing fields are dropped");
        assert_eq!(filter.operators, Some(vec!["eq".into(), "gte".into()]));
        assert!(!f.citations, "b has no citations");
    }

    #[test]
    fn one_engine_without_filter_means_no_filter_and_no_retriever_means_none() {
        let a = caps(json!({"retrieve": {}, "filter": {"fields": ["x"]}}));
        let b = caps(json!({"retrieve": {}}));
        let f = federate_retrieve(&[&a, &b]).unwrap();
        assert_eq!((f.filter, f.retrieve.max_k), (None, None));
        assert_eq!(federate_retrieve(&[&b]).map(|f| f.filter), Some(None), "no filter still retrieves");
        assert_eq!(federate_retrieve(&[&caps(json!({}))]), None);
    }
}
