//! `feedback` (§7.16).

use serde::{Deserialize, Serialize};

use crate::Meta;
use crate::message::RequestId;

/// One feedback signal about a hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Signal {
    /// The hit the signal is about.
    pub hit_id: RequestId,
    /// Placed in the final context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used: Option<bool>,
    /// Cited in the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cited: Option<bool>,
    /// Relevance label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helpful: Option<bool>,
    /// Scalar reward in `[-1,1]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward: Option<f64>,
    /// Integrity signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poison_suspected: Option<bool>,
    /// Safety signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub injection_suspected: Option<bool>,
}

/// `feedback` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackParams {
    /// Trajectory handle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The query the hits answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The signals (each an object, never an array of its fields).
    #[serde(deserialize_with = "crate::objects")]
    pub signals: Vec<Signal>,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// `feedback` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FeedbackResult {
    /// Signals recorded.
    pub accepted: u64,
    /// Side-band data.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_signal_is_an_object_never_an_array_of_its_fields() {
        let ok: FeedbackParams =
            serde_json::from_value(json!({"signals": [{"hitId": "h", "used": true}]})).expect("valid");
        assert_eq!(ok.signals[0].hit_id, RequestId::from("h"));
        let e =
            serde_json::from_value::<FeedbackParams>(json!({"signals": [["h"]]})).expect_err("an array is no signal");
        assert!(e.to_string().contains("[0] must be an object"), "{e}");
        assert!(serde_json::from_value::<FeedbackParams>(json!({"signals": [{"hitId": "h", "reward": "1"}]})).is_err());
    }
}
