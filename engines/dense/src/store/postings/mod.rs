//! The metadata index: for every declared `keyword`, `bool`, `int` and `date` field, the live
//! slots holding each value (postings, as compressed bitmaps), kept current by every upsert
//! and delete, rebuilt on compaction and new field declarations, saved with every snapshot and
//! read back on open ([`persist`]).
//!
//! [`MetaIndex::candidates`] turns a filter into the slots that can match it: an exact set when
//! every leaf is answered by postings, otherwise a superset (a leaf the index cannot answer
//! leaves an `and` to its other children) or nothing at all. Its size is the planner's
//! cardinality estimate, and the set itself is what an exact scan of the matches reads.

mod persist;

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use rcp_wire::Meta;
use rcp_wire::filter::{FieldType, Filter, Op, date_to_epoch_ms};
use roaring::RoaringBitmap;
use serde_json::Value;

/// The slots a filter can match.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidates {
    /// Live slots that may match (every match is among them).
    pub slots: RoaringBitmap,
    /// Whether every slot in `slots` matches (no per-document check needed).
    pub exact: bool,
}

impl Candidates {
    fn exact(slots: RoaringBitmap) -> Self {
        Self { slots, exact: true }
    }

    /// How many slots.
    pub fn len(&self) -> usize {
        usize::try_from(self.slots.len()).unwrap_or(usize::MAX)
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

/// How one field's values are keyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Strings, compared whole.
    Keyword,
    /// Booleans.
    Bool,
    /// Integers, compared as numbers.
    Int,
    /// §4.6 timestamps, keyed by epoch milliseconds.
    Date,
}

impl Kind {
    fn of(field_type: &FieldType) -> Option<Self> {
        match field_type {
            FieldType::Keyword => Some(Kind::Keyword),
            FieldType::Bool => Some(Kind::Bool),
            FieldType::Int => Some(Kind::Int),
            FieldType::Date => Some(Kind::Date),
            _ => None,
        }
    }
}

/// One value's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Term(String),
    Number(i64),
}

/// A document value's key, `None` when the value does not have the field's type.
fn doc_key(kind: Kind, value: &Value) -> Option<Key> {
    match (kind, value) {
        (Kind::Keyword, Value::String(s)) => Some(Key::Term(s.clone())),
        (Kind::Bool, Value::Bool(b)) => Some(Key::Term(b.to_string())),
        (Kind::Int, Value::Number(n)) => n.as_i64().map(Key::Number),
        (Kind::Date, v) => date_to_epoch_ms(v).map(Key::Number),
        _ => None,
    }
}

/// The postings of one field.
#[derive(Debug, Clone, Default)]
struct FieldPostings {
    /// Slots per term (keyword, bool).
    terms: HashMap<String, RoaringBitmap>,
    /// Slots per number (int, date), ordered for range filters.
    numbers: BTreeMap<i64, RoaringBitmap>,
    /// Slots holding a non-null value.
    present: RoaringBitmap,
    /// Slots whose value could not be keyed (not of the field's type): always candidates.
    unkeyed: RoaringBitmap,
}

impl FieldPostings {
    fn postings_mut(&mut self, key: Key) -> &mut RoaringBitmap {
        match key {
            Key::Term(t) => self.terms.entry(t).or_default(),
            Key::Number(n) => self.numbers.entry(n).or_default(),
        }
    }

    fn insert(&mut self, kind: Kind, slot: u32, value: &Value) {
        self.present.insert(slot);
        match doc_key(kind, value) {
            Some(key) => {
                self.postings_mut(key).insert(slot);
            }
            None => {
                self.unkeyed.insert(slot);
            }
        }
    }

    fn remove(&mut self, kind: Kind, slot: u32, value: &Value) {
        self.present.remove(slot);
        self.unkeyed.remove(slot);
        match doc_key(kind, value) {
            Some(Key::Term(t)) => {
                if let Some(p) = self.terms.get_mut(&t) {
                    p.remove(slot);
                    if p.is_empty() {
                        self.terms.remove(&t);
                    }
                }
            }
            Some(Key::Number(n)) => {
                if let Some(p) = self.numbers.get_mut(&n) {
                    p.remove(slot);
                    if p.is_empty() {
                        self.numbers.remove(&n);
                    }
                }
            }
            None => {}
        }
    }

    /// Slots equal to one operand, or `None` when the operand cannot be keyed the way `matches`
    /// compares it. The second value says whether the set is exact for `eq`.
    fn equal(&self, kind: Kind, operand: &Value) -> Option<(RoaringBitmap, bool)> {
        let exact = self.unkeyed.is_empty();
        let found = |p: Option<&RoaringBitmap>| p.cloned().unwrap_or_default();
        match (kind, operand) {
            (Kind::Keyword, Value::String(s)) => Some((found(self.terms.get(s)), exact)),
            (Kind::Bool, Value::Bool(b)) => Some((found(self.terms.get(&b.to_string())), exact)),
            (Kind::Int, Value::Number(n)) => {
                let x = n.as_f64()?;
                // A fractional operand equals no integer.
                let set = if x.fract() == 0.0 { found(self.numbers.get(&(x as i64))) } else { RoaringBitmap::new() };
                Some((set, exact))
            }
            // Dates compare whole strings for `eq`, instants otherwise: the instant's postings
            // hold every match, but not only matches.
            (Kind::Date, v) => date_to_epoch_ms(v).map(|ms| (found(self.numbers.get(&ms)), false)),
            _ => None,
        }
    }

    /// Slots whose number lies on the `op` side of `operand` (int and date fields).
    fn range(&self, kind: Kind, op: Op, operand: &Value) -> Option<RoaringBitmap> {
        let x = match (kind, operand) {
            (Kind::Int, Value::Number(n)) => n.as_f64()?,
            (Kind::Date, v) => date_to_epoch_ms(v)? as f64,
            _ => return None,
        };
        // Integer bounds equivalent to comparing each key with `x` as a number.
        let (lo, hi) = match op {
            Op::Gt => (Bound::Included(x.floor() as i64 + 1), Bound::Unbounded),
            Op::Gte => (Bound::Included(x.ceil() as i64), Bound::Unbounded),
            Op::Lt => (Bound::Unbounded, Bound::Included(x.ceil() as i64 - 1)),
            Op::Lte => (Bound::Unbounded, Bound::Included(x.floor() as i64)),
            _ => return None,
        };
        if let (Bound::Included(a), Bound::Included(b)) = (lo, hi)
            && a > b
        {
            return Some(RoaringBitmap::new());
        }
        let mut out = RoaringBitmap::new();
        for p in self.numbers.range((lo, hi)).map(|(_, p)| p) {
            out |= p;
        }
        Some(out)
    }
}

/// The metadata index of a table.
#[derive(Debug, Clone, Default)]
pub struct MetaIndex {
    fields: BTreeMap<String, (Kind, FieldPostings)>,
    declared: BTreeMap<String, FieldType>,
    live: RoaringBitmap,
}

impl MetaIndex {
    /// An empty index over the indexable fields among `fields`.
    pub fn new(fields: &BTreeMap<String, FieldType>) -> Self {
        let indexed = fields
            .iter()
            .filter_map(|(name, t)| Kind::of(t).map(|k| (name.clone(), (k, FieldPostings::default()))))
            .collect();
        Self { fields: indexed, declared: fields.clone(), live: RoaringBitmap::new() }
    }

    /// The declared fields it was made for.
    pub fn declared(&self) -> &BTreeMap<String, FieldType> {
        &self.declared
    }

    /// The names of the fields with postings.
    pub fn indexed_fields(&self) -> impl Iterator<Item = &str> {
        self.fields.keys().map(String::as_str)
    }

    /// Live slots.
    pub fn live(&self) -> &RoaringBitmap {
        &self.live
    }

    /// Records a live document in `slot`.
    pub fn insert(&mut self, slot: usize, meta: &Meta) {
        let Ok(slot) = u32::try_from(slot) else { return };
        self.live.insert(slot);
        for (name, (kind, postings)) in &mut self.fields {
            if let Some(v) = meta.get(name).filter(|v| !v.is_null()) {
                postings.insert(*kind, slot, v);
            }
        }
    }

    /// Forgets the document in `slot` (deleted or replaced).
    pub fn remove(&mut self, slot: usize, meta: &Meta) {
        let Ok(slot) = u32::try_from(slot) else { return };
        self.live.remove(slot);
        for (name, (kind, postings)) in &mut self.fields {
            if let Some(v) = meta.get(name).filter(|v| !v.is_null()) {
                postings.remove(*kind, slot, v);
            }
        }
    }

    /// The slots `filter` can match, or `None` when the index cannot narrow it down.
    pub fn candidates(&self, filter: &Filter) -> Option<Candidates> {
        match filter {
            Filter::And(items) => {
                let known: Vec<Candidates> = items.iter().filter_map(|f| self.candidates(f)).collect();
                let all_known = known.len() == items.len();
                let mut known = known.into_iter();
                let mut acc = known.next()?;
                for c in known {
                    acc.slots &= c.slots;
                    acc.exact &= c.exact;
                }
                acc.exact &= all_known;
                Some(acc)
            }
            Filter::Or(items) => {
                let mut acc = Candidates::exact(RoaringBitmap::new());
                for f in items {
                    let c = self.candidates(f)?;
                    acc.slots |= c.slots;
                    acc.exact &= c.exact;
                }
                Some(acc)
            }
            Filter::Not(inner) => self.complement(self.candidates(inner)?),
            Filter::Leaf { field, op, value } => self.leaf(field, *op, value),
        }
    }

    /// The live slots outside an exact set (the complement of a superset says nothing).
    fn complement(&self, c: Candidates) -> Option<Candidates> {
        c.exact.then(|| Candidates::exact(&self.live - &c.slots))
    }

    fn leaf(&self, field: &str, op: Op, value: &Value) -> Option<Candidates> {
        let (kind, p) = self.fields.get(field).map(|(k, p)| (*k, p))?;
        match op {
            Op::Eq => self.equal_any(kind, p, std::slice::from_ref(value)),
            Op::In => self.equal_any(kind, p, value.as_array()?),
            Op::Ne => self.complement(self.equal_any(kind, p, std::slice::from_ref(value))?),
            Op::Nin => self.complement(self.equal_any(kind, p, value.as_array()?)?),
            Op::Gt | Op::Gte | Op::Lt | Op::Lte => {
                let mut slots = p.range(kind, op, value)?;
                slots |= &p.unkeyed;
                Some(Candidates { slots, exact: p.unkeyed.is_empty() })
            }
            Op::Exists => {
                let present = Candidates::exact(p.present.clone());
                if value.as_bool().unwrap_or(true) { Some(present) } else { self.complement(present) }
            }
            Op::Contains => None,
        }
    }

    /// Slots equal to any of `operands` (plus the unkeyed ones, which the filter decides).
    fn equal_any(&self, kind: Kind, p: &FieldPostings, operands: &[Value]) -> Option<Candidates> {
        let mut acc = Candidates::exact(p.unkeyed.clone());
        acc.exact = p.unkeyed.is_empty();
        for v in operands {
            let (slots, exact) = p.equal(kind, v)?;
            acc.slots |= slots;
            acc.exact &= exact;
        }
        Some(acc)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn meta(v: Value) -> Meta {
        v.as_object().cloned().unwrap_or_default()
    }

    fn index(docs: &[Value]) -> (MetaIndex, Vec<Meta>) {
        let fields = BTreeMap::from([
            ("lang".to_owned(), FieldType::Keyword),
            ("year".to_owned(), FieldType::Int),
            ("at".to_owned(), FieldType::Date),
            ("draft".to_owned(), FieldType::Bool),
            ("score".to_owned(), FieldType::Float),
        ]);
        let mut idx = MetaIndex::new(&fields);
        let metas: Vec<Meta> = docs.iter().cloned().map(meta).collect();
        for (slot, m) in metas.iter().enumerate() {
            idx.insert(slot, m);
        }
        (idx, metas)
    }

    fn docs() -> Vec<Value> {
        vec![
            json!({"lang": "en", "year": 2001, "at": "2020-01-01", "draft": true, "score": 1.5}),
            json!({"lang": "de", "year": 2002, "at": "2021-06-01T00:00:00Z"}),
            json!({"lang": "en", "year": 2003, "at": 1_700_000_000_000_i64, "draft": false}),
            json!({"year": 1999}),
            json!({"lang": null, "year": 2002}),
        ]
    }

    /// Every filter the index answers yields a superset of the true matches, and exactly the
    /// matches when it says it is exact.
    #[test]
    fn candidates_agree_with_the_filter() {
        let (idx, metas) = index(&docs());
        let filters = [
            json!({"field": "lang", "op": "eq", "value": "en"}),
            json!({"field": "lang", "op": "ne", "value": "en"}),
            json!({"field": "lang", "op": "in", "value": ["de", "fr"]}),
            json!({"field": "lang", "op": "nin", "value": ["de"]}),
            json!({"field": "lang", "op": "exists", "value": false}),
            json!({"field": "year", "op": "gt", "value": 2001.5}),
            json!({"field": "year", "op": "gte", "value": 2002}),
            json!({"field": "year", "op": "lt", "value": 2002}),
            json!({"field": "year", "op": "lte", "value": 2001.5}),
            json!({"field": "year", "op": "eq", "value": 2002.5}),
            json!({"field": "at", "op": "gte", "value": "2021-01-01"}),
            json!({"field": "at", "op": "eq", "value": "2020-01-01T00:00:00Z"}),
            json!({"field": "draft", "op": "eq", "value": false}),
            json!({"and": [{"field": "lang", "op": "eq", "value": "en"}, {"field": "score", "op": "gt", "value": 1}]}),
            json!({"or": [{"field": "lang", "op": "eq", "value": "de"}, {"field": "year", "op": "lt", "value": 2000}]}),
            json!({"not": {"field": "year", "op": "in", "value": [2002, 2003]}}),
        ];
        for f in filters {
            let filter = Filter::parse(&f).unwrap();
            let c = idx.candidates(&filter).unwrap_or_else(|| panic!("{f} should be answered"));
            let truth: Vec<u32> = (0..metas.len() as u32).filter(|&s| filter.matches(&metas[s as usize])).collect();
            for s in &truth {
                assert!(c.slots.contains(*s), "{f}: match {s} missing");
            }
            if c.exact {
                assert_eq!(c.slots.iter().collect::<Vec<_>>(), truth, "{f}");
            }
        }
    }

    #[test]
    fn unanswerable_filters_give_none() {
        let (idx, _) = index(&docs());
        for f in [
            json!({"field": "score", "op": "gt", "value": 1}),
            json!({"field": "lang", "op": "contains", "value": "e"}),
            json!({"or": [{"field": "lang", "op": "eq", "value": "de"}, {"field": "score", "op": "gt", "value": 1}]}),
            json!({"not": {"field": "at", "op": "eq", "value": "2020-01-01"}}),
        ] {
            assert_eq!(idx.candidates(&Filter::parse(&f).unwrap()), None, "{f}");
        }
    }

    #[test]
    fn removal_and_unkeyed_values() {
        let (mut idx, metas) = index(&docs());
        let en = Filter::eq("lang", "en");
        idx.remove(0, &metas[0]);
        assert_eq!(idx.candidates(&en).unwrap().slots.iter().collect::<Vec<_>>(), vec![2]);
        assert_eq!(idx.live().len(), 4);
        // A value of another type is kept as a candidate of every comparison, never exact.
        idx.insert(9, &meta(json!({"lang": 7})));
        let c = idx.candidates(&en).unwrap();
        assert!(!c.exact && c.slots.contains(9));
        assert_eq!(idx.candidates(&Filter::ne("lang", "en")), None);
    }
}
