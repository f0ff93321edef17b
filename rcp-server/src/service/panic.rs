//! The text of a caught panic, for the -32603 answer and the log.

/// The panic's message when it carried a string (as `panic!` with a message does), else a
/// generic one.
pub(crate) fn message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panicked without a message".to_owned()
    }
}
