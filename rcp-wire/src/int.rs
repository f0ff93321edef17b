//! Integer fields on the wire (§4.6): JSON numbers with no fractional part. `3` and `3.0`
//! are the same integer (JSON Schema's `integer` accepts both); `3.5`, strings and values
//! outside the target range are rejected with a message naming what was expected.

use serde::Deserialize;
use serde::de::{self, Deserializer};

fn to_i128<E: de::Error>(n: serde_json::Number) -> Result<i128, E> {
    if let Some(i) = n.as_i64() {
        return Ok(i128::from(i));
    }
    if let Some(u) = n.as_u64() {
        return Ok(i128::from(u));
    }
    match n.as_f64() {
        Some(f) if f.is_finite() && f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0 => Ok(f as i128),
        _ => Err(E::custom(format!("expected an integer, got {n}"))),
    }
}

fn number<'de, D: Deserializer<'de>>(d: D) -> Result<serde_json::Number, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Number(n) => Ok(n),
        other => Err(de::Error::custom(format!("expected an integer, got {}", crate::message::json_type(&other)))),
    }
}

fn ranged<T: TryFrom<i128>, E: de::Error>(v: i128, what: &str) -> Result<T, E> {
    T::try_from(v).map_err(|_| E::custom(format!("{v} is out of range for {what}")))
}

/// A required unsigned integer.
pub(crate) fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = to_i128(number(d)?)?;
    ranged(v, "a non-negative integer")
}

/// An optional unsigned integer (`null` is absent).
pub(crate) fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<serde_json::Number>::deserialize(d)? {
        None => Ok(None),
        Some(n) => ranged(to_i128(n)?, "a non-negative integer").map(Some),
    }
}

/// An optional unsigned 32-bit integer.
pub(crate) fn opt_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match Option::<serde_json::Number>::deserialize(d)? {
        None => Ok(None),
        Some(n) => ranged(to_i128(n)?, "a non-negative 32-bit integer").map(Some),
    }
}

/// A required signed integer.
pub(crate) fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    ranged(to_i128(number(d)?)?, "a 64-bit integer")
}

/// An optional signed integer.
pub(crate) fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    match Option::<serde_json::Number>::deserialize(d)? {
        None => Ok(None),
        Some(n) => ranged(to_i128(n)?, "a 64-bit integer").map(Some),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, Debug)]
    struct P {
        #[serde(deserialize_with = "super::u64")]
        k: u64,
        #[serde(default, deserialize_with = "super::opt_u32")]
        level: Option<u32>,
    }

    #[test]
    fn integral_floats_are_integers_and_fractions_are_not() {
        let p: P = serde_json::from_value(json!({"k": 3.0, "level": null})).unwrap();
        assert_eq!((p.k, p.level), (3, None));
        let p: P = serde_json::from_value(json!({"k": 3, "level": 2.0})).unwrap();
        assert_eq!((p.k, p.level), (3, Some(2)));
        for bad in
            [json!({"k": 2.5}), json!({"k": -1}), json!({"k": "3"}), json!({"k": 1e300}), json!({"k": 1, "level": -2})]
        {
            assert!(serde_json::from_value::<P>(bad.clone()).is_err(), "{bad}");
        }
        assert!(serde_json::from_value::<P>(json!({})).is_err(), "k is required");
    }
}
