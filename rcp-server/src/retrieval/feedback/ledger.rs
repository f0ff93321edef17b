//! What the log records and the state replayed from it: how many integrity signals each hit
//! drew and which hits are quarantined.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use rcp_wire::feedback::Signal;
use serde::{Deserialize, Serialize};

/// One line of the signal log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum Record {
    /// The signals of one accepted `feedback` call.
    Feedback {
        /// Milliseconds since the Unix epoch.
        at: u64,
        /// The signals, as received (after bounds checks).
        signals: Vec<Signal>,
        /// The hits these signals put into quarantine (decided with the threshold in force
        /// when they were written, so a later threshold never rewrites the past).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        quarantined: Vec<String>,
    },
    /// An operator released a hit from quarantine (its suspicion count starts again at 0).
    Release {
        /// Milliseconds since the Unix epoch.
        at: u64,
        /// The hit released.
        hit_id: String,
    },
    /// A compacted log: the state every earlier record added up to.
    Snapshot {
        /// Integrity signals per hit, for hits that drew any.
        suspicion: BTreeMap<String, u32>,
        /// Quarantined hits.
        quarantined: Vec<String>,
    },
}

/// A signal's hit id as the hits of a result spell it.
pub(super) fn hit_key(signal: &Signal) -> String {
    match &signal.hit_id {
        rcp_wire::RequestId::String(s) => s.clone(),
        rcp_wire::RequestId::Number(n) => n.to_string(),
    }
}

/// Whether `signal` flags its hit as poisoned or injected.
pub(super) fn suspects(signal: &Signal) -> bool {
    signal.poison_suspected == Some(true) || signal.injection_suspected == Some(true)
}

/// The replayed state.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    threshold: u32,
    suspicion: BTreeMap<String, u32>,
    quarantined: std::collections::BTreeSet<String>,
}

impl Ledger {
    /// An empty ledger that will quarantine a hit at `threshold` integrity signals (replayed
    /// records keep the decisions they carry).
    pub(super) fn new(threshold: u32) -> Self {
        Self { threshold: threshold.max(1), ..Self::default() }
    }

    /// Applies one record.
    pub(super) fn apply(&mut self, record: &Record) {
        match record {
            Record::Feedback { signals, quarantined, .. } => {
                for s in signals.iter().filter(|s| suspects(s)) {
                    let count = self.suspicion.entry(hit_key(s)).or_default();
                    *count = count.saturating_add(1);
                }
                self.quarantined.extend(quarantined.iter().cloned());
            }
            Record::Release { hit_id, .. } => {
                self.suspicion.remove(hit_id);
                self.quarantined.remove(hit_id);
            }
            Record::Snapshot { suspicion, quarantined } => {
                self.suspicion.clone_from(suspicion);
                self.quarantined = quarantined.iter().cloned().collect();
            }
        }
    }

    /// The hits not yet quarantined that `signals` bring to the threshold, in id order.
    pub(super) fn crossing(&self, signals: &[Signal]) -> Vec<String> {
        let mut added: BTreeMap<String, u32> = BTreeMap::new();
        for s in signals.iter().filter(|s| suspects(s)) {
            *added.entry(hit_key(s)).or_default() += 1;
        }
        added
            .into_iter()
            .filter(|(hit, n)| {
                !self.quarantined.contains(hit)
                    && self.suspicion.get(hit).copied().unwrap_or(0).saturating_add(*n) >= self.threshold
            })
            .map(|(hit, _)| hit)
            .collect()
    }

    /// How many hits not yet tracked `signals` would start tracking.
    pub(super) fn new_hits(&self, signals: &[Signal]) -> usize {
        let fresh: HashSet<String> =
            signals.iter().filter(|s| suspects(s)).map(hit_key).filter(|k| !self.suspicion.contains_key(k)).collect();
        fresh.len()
    }

    /// Hits tracked (those that drew an integrity signal and were not released).
    pub(super) fn tracked(&self) -> usize {
        self.suspicion.len()
    }

    /// Whether `hit` is quarantined.
    pub(super) fn is_quarantined(&self, hit: &str) -> bool {
        self.quarantined.contains(hit)
    }

    /// The quarantined hits with their integrity-signal counts, in id order.
    pub(super) fn quarantined(&self) -> Vec<(String, u32)> {
        self.quarantined.iter().map(|h| (h.clone(), self.suspicion.get(h).copied().unwrap_or(0))).collect()
    }

    /// The quarantined set, as the retrieve rule reads it.
    pub(super) fn quarantine_set(&self) -> Arc<HashSet<String>> {
        Arc::new(self.quarantined.iter().cloned().collect())
    }

    /// The state as one record, for compaction.
    pub(super) fn snapshot(&self) -> Record {
        Record::Snapshot { suspicion: self.suspicion.clone(), quarantined: self.quarantined.iter().cloned().collect() }
    }
}
