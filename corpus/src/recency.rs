//! `retrieve.recency` (§7.7): the one decay formula every bundled engine applies, so a request
//! with `recency` reorders the same way on rcp-bm25, rcp-dense and rcp-pg.
//!
//! A hit's score is multiplied by `0.5^(age / halfLife)`: a document `halfLifeDays` old keeps
//! half its score, one twice as old a quarter (a negative score, such as a cosine below 0, loses
//! the same share of its magnitude the other way: it is pushed down, never up). The age is measured from the engine's clock
//! (`now`) to the value of the declared `date` field (§4.6), never below zero (a document dated
//! in the future is as fresh as one dated now). A document without a date in that field gets
//! factor 0: a positive score becomes 0, below every dated one with a positive score.

use rcp_wire::Meta;
use rcp_wire::filter::date_to_epoch_ms;

/// `recency.halfLifeDays` when the request gives none; the framework fills it in and says so
/// in `usage.notes`.
pub const DEFAULT_HALF_LIFE_DAYS: f64 = 30.0;

/// Milliseconds in one day.
const DAY_MS: f64 = 86_400_000.0;

/// The decay of one document: the factor its score is multiplied by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decay {
    /// The clock ages are measured from, epoch milliseconds.
    pub now_ms: i64,
    /// The half-life, milliseconds (> 0).
    pub half_life_ms: f64,
}

impl Decay {
    /// The decay of a request with `half_life_days`, measured from `now_ms`.
    pub fn new(now_ms: i64, half_life_days: f64) -> Self {
        Self { now_ms, half_life_ms: half_life_days * DAY_MS }
    }

    /// The decay measured from the system clock.
    pub fn from_now(half_life_days: f64) -> Self {
        Self::new(now_ms(), half_life_days)
    }

    /// The factor of a document dated `date_ms` (epoch milliseconds), in `[0, 1]`; `None` (no
    /// date) is 0.
    pub fn factor(&self, date_ms: Option<i64>) -> f64 {
        date_ms.map_or(0.0, |date| {
            let age = self.now_ms.saturating_sub(date).max(0) as f64;
            0.5f64.powf(age / self.half_life_ms)
        })
    }

    /// The factor of a document whose metadata holds its date in `field` (an RFC 3339 string or
    /// epoch milliseconds; the first item of an array).
    pub fn factor_of(&self, meta: &Meta, field: &str) -> f64 {
        let date = match meta.get(field) {
            Some(serde_json::Value::Array(items)) => items.first().and_then(date_to_epoch_ms),
            Some(v) => date_to_epoch_ms(v),
            None => None,
        };
        self.factor(date)
    }

    /// `score` decayed by [`Self::factor_of`]: multiplied by it when positive; a negative
    /// score (a cosine below 0) is pushed down by the same share of its magnitude, so an older
    /// document never rises above a newer one with the same score.
    pub fn apply(&self, score: f64, meta: &Meta, field: &str) -> f64 {
        score - (1.0 - self.factor_of(meta, field)) * score.abs()
    }
}

/// The system clock in epoch milliseconds (0 before 1970).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_half_life_halves_the_score_and_undated_documents_sink() {
        let now = 1_000 * 86_400_000;
        let d = Decay::new(now, 30.0);
        assert_eq!(d.factor(Some(now)), 1.0);
        assert!((d.factor(Some(now - 30 * 86_400_000)) - 0.5).abs() < 1e-12);
        assert!((d.factor(Some(now - 60 * 86_400_000)) - 0.25).abs() < 1e-12);
        assert_eq!(d.factor(Some(now + 5)), 1.0, "a future date is as fresh as now");
        assert_eq!(d.factor(None), 0.0);
        let meta = |v: serde_json::Value| v.as_object().cloned().unwrap();
        assert_eq!(d.factor_of(&meta(json!({"published": now})), "published"), 1.0);
        assert_eq!(d.factor_of(&meta(json!({"published": "not a date"})), "published"), 0.0);
        assert_eq!(d.factor_of(&meta(json!({})), "published"), 0.0);
        let fresh = Decay::from_now(30.0);
        let old = fresh.apply(1.0, &meta(json!({"published": "1990-01-01"})), "published");
        let new = fresh.apply(0.9, &meta(json!({"published": "2026-12-01T00:00:00Z"})), "published");
        assert!(new > old, "a recent document overtakes an older one with a slightly higher score");
        // A negative score (a cosine below 0) is pushed down by age, never raised towards 0.
        let month_old = json!({"published": now - 30 * 86_400_000});
        assert!((d.apply(-0.2, &meta(month_old.clone()), "published") - -0.3).abs() < 1e-12);
        assert!(
            d.apply(-0.2, &meta(month_old), "published") < d.apply(-0.2, &meta(json!({"published": now})), "published")
        );
        assert!((d.apply(0.4, &meta(json!({"published": now - 30 * 86_400_000})), "published") - 0.2).abs() < 1e-12);
    }
}
