//! Metadata filtering (§8): the advertised `filter` capability, a typed filter tree with a
//! builder, the validator servers run before compiling a filter to their backend, and a
//! reference evaluator for in-memory engines.
//!
//! A filter is a boolean tree: `{"and":[...]}`, `{"or":[...]}`, `{"not":{...}}` or a leaf
//! `{"field":..,"op":..,"value":..}`. [`validate`] checks a raw wire filter against the
//! advertised [`FilterCapability`] and returns a normalised [`Filter`] or a precise error:
//! `-32602` with `error.data.field` set to the offending path (`filter.and[1].value`), or
//! `-32005` for an operator outside the advertised `filter.operators`.
//!
//! ```
//! use rcp_wire::filter::{Filter, FilterCapability, FieldType, validate};
//!
//! let f = Filter::eq("lang", "en") & (Filter::gte("year", 2023) | Filter::is_in("tag", ["news", "blog"]));
//! let cap = FilterCapability::typed([
//!     ("lang", FieldType::Keyword),
//!     ("year", FieldType::Int),
//!     ("tag", FieldType::Keyword),
//! ]);
//! assert_eq!(validate(&f.to_value(), &cap).unwrap(), f);
//! ```
//!
//! The module is split by concern: `capability` (advertised fields, operators and types),
//! `tree` (the [`Filter`] AST and its builder), `validate` (parsing and validation with exact
//! error paths), `eval` (evaluating a filter on a document's metadata) and `date` (§4.6
//! timestamps, shared by validation and evaluation). Everything is re-exported here.

#![allow(clippy::result_large_err, reason = "RcpError is the protocol error type this API is specified to return")]

mod capability;
mod date;
mod eval;
mod tree;
mod validate;

pub use capability::{FieldType, FilterCapability, FilterFields, Op};
pub use date::date_to_epoch_ms;
pub use tree::Filter;
pub use validate::{MAX_DEPTH, ROOT_PATH, validate};

/// Test fixtures shared by the tests of several concerns.
#[cfg(test)]
mod fixtures {
    use serde_json::Value;

    use super::{FieldType, Filter, FilterCapability, validate};

    /// A typed capability with one field of every §8 type (and one of an unknown type).
    pub(super) fn cap() -> FilterCapability {
        FilterCapability::typed([
            ("lang", FieldType::Keyword),
            ("title", FieldType::Text),
            ("year", FieldType::Int),
            ("rating", FieldType::Float),
            ("draft", FieldType::Bool),
            ("published", FieldType::Date),
            ("loc", FieldType::Geo),
            ("tag", FieldType::Keyword),
            ("future", FieldType::Other("vector".into())),
        ])
    }

    /// Validates `v` against `cap`, failing the test with the error if it is rejected.
    #[track_caller]
    pub(super) fn ok(v: Value, cap: &FilterCapability) -> Filter {
        match validate(&v, cap) {
            Ok(f) => f,
            Err(e) => panic!("expected {v} to validate, got {e:?}"),
        }
    }
}
