//! What the user reads when a command fails: what happened, each cause once (no doubled
//! `invalid params:` prefix, no cause printed twice), and, where one helps, what to do next.

use std::error::Error;

use rcp_client::ClientError;
use rcp_wire::{ErrorCode, RcpError};

/// RCP method names (§7): a `--http` URL ending in one names a method, not the base URL.
const METHODS: [&str; 10] =
    ["initialize", "info", "ping", "shutdown", "retrieve", "embed", "rerank", "index", "graph", "notifications"];

/// What the command line said, for hints.
#[derive(Debug, Default)]
pub(crate) struct Context {
    /// The `--http` URL, if any.
    pub http: Option<String>,
    /// The `--token-env` variable, if any.
    pub token_env: Option<String>,
    /// The filter sent, as JSON, if any (a refused filter then shows how it was read).
    pub filter: Option<String>,
}

/// One client error as one readable message: the server's own error once, each cause once.
pub(crate) fn client_error(e: &ClientError) -> String {
    match e {
        // The protocol error already says "invalid params: FIELD: DETAIL".
        ClientError::InvalidParams(err) => err.to_string(),
        other => rcp_client::causes(other),
    }
}

/// The protocol error inside `e`, if the engine (or the client's own check) answered with one.
fn rcp_error<'a>(e: &'a (dyn Error + 'static)) -> Option<&'a RcpError> {
    let mut next = Some(e);
    while let Some(cause) = next {
        if let Some(ClientError::Rpc(err) | ClientError::InvalidParams(err)) = cause.downcast_ref::<ClientError>() {
            return Some(err);
        }
        if let Some(err) = cause.downcast_ref::<RcpError>() {
            return Some(err);
        }
        next = cause.source();
    }
    None
}

/// The whole report of a failed command: the message, then one `hint:` line per thing to try.
pub(crate) fn report(e: &(dyn Error + 'static), ctx: &Context) -> String {
    let message = match e.downcast_ref::<ClientError>() {
        Some(c) => client_error(c),
        None => rcp_client::causes(e),
    };
    let lower = message.to_ascii_lowercase();
    let http = ctx.http.as_deref().and_then(|u| reqwest::Url::parse(u.trim()).ok());
    // A name that does not resolve: one line instead of the HTTP stack's chain.
    if lower.contains("dns error") || lower.contains("failed to lookup address") || lower.contains("name or service") {
        let host = http.as_ref().and_then(|u| u.host_str().map(str::to_owned)).unwrap_or_else(|| "the host".into());
        return format!(
            "cannot resolve the host name '{host}'{}: check its spelling, or use an IP address",
            ctx.http.as_deref().map(|u| format!(" of {u}")).unwrap_or_default()
        );
    }
    let mut hints = Vec::new();
    if let Some(url) = &http
        && let Some(last) = url.path_segments().and_then(|mut s| s.next_back())
        && METHODS.contains(&last)
    {
        let base = url.as_str().trim_end_matches('/').trim_end_matches(last).trim_end_matches('/').to_owned();
        hints.push(format!(
            "--http takes the server's base URL and rcp adds the method itself: drop '/{last}' (try {base})"
        ));
    }
    let err = rcp_error(e);
    if err.is_some_and(|r| r.code == ErrorCode::UNAUTHORIZED) {
        hints.push(match &ctx.token_env {
            Some(var) => format!("the engine refused the token held in {var}: check the variable's value"),
            None => "the engine wants a bearer token: put it in an environment variable and pass \
                     --token-env VAR (or -H 'Authorization: Bearer ...')"
                .to_owned(),
        });
    }
    if let (Some(r), Some(filter)) = (err, &ctx.filter)
        && r.code == ErrorCode::INVALID_PARAMS
        && r.field().is_some_and(|f| f.starts_with("filter"))
    {
        hints.push(format!("--filter was sent as {filter}"));
    }
    let mut out = message;
    for h in hints {
        out.push_str("\nrcp: hint: ");
        out.push_str(&h);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_params_say_so_once() {
        let e = ClientError::InvalidParams(RcpError::invalid_params("filter.value", "expected a number, got string"));
        let m = client_error(&e);
        assert_eq!(m.matches("invalid params").count(), 1, "{m}");
        assert!(m.contains("filter.value: expected a number"), "{m}");
    }

    #[test]
    fn hints_name_what_to_do() {
        let unauthorized = ClientError::Rpc(RcpError::new(ErrorCode::UNAUTHORIZED, "unauthorized"));
        let r = report(&unauthorized, &Context::default());
        assert!(r.contains("--token-env VAR"), "{r}");
        let ctx = Context { token_env: Some("RCP_TOKEN".into()), ..Context::default() };
        assert!(report(&unauthorized, &ctx).contains("refused the token held in RCP_TOKEN"));
        let ctx = Context { http: Some("http://127.0.0.1:8080/rcp/retrieve".into()), ..Context::default() };
        let bad = ClientError::Rpc(RcpError::invalid_request("path method 'retrieve/info' does not match"));
        let r = report(&bad, &ctx);
        assert!(r.contains("drop '/retrieve' (try http://127.0.0.1:8080/rcp)"), "{r}");
        let plain = ClientError::Rpc(RcpError::invalid_request("x"));
        let ctx = Context { http: Some("http://127.0.0.1:8080/rcp".into()), ..Context::default() };
        assert!(!report(&plain, &ctx).contains("hint"));
    }
}
