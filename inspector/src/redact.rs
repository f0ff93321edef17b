//! What the page never shows: credential headers (left to a shell variable in the page's curl
//! commands) and the user information of URLs.

/// Whether a header's value is a credential, never shown on the page: `Authorization`,
/// `Proxy-Authorization`, `Cookie`, and any name containing `key`, `token`, `secret`,
/// `password`, `auth`, `session`, `credential` or `signature` (`X-Api-Key`, `X-Auth-Token`,
/// `RCP-Session`, ...). Over-redacting costs the page a `$VAR` to fill in; under-redacting leaks.
pub fn is_secret_header(name: &str) -> bool {
    const WORDS: [&str; 9] =
        ["auth", "cookie", "key", "token", "secret", "password", "session", "credential", "signature"];
    let name = name.to_ascii_lowercase();
    WORDS.iter().any(|w| name.contains(w))
}

/// The shell variable a redacted header is left to in the page's curl commands: `RCP_TOKEN`
/// for `Authorization`, else `RCP_` and the header's name in upper snake case
/// (`X-Api-Key` → `RCP_X_API_KEY`).
pub(crate) fn shell_var(name: &str) -> String {
    if name.eq_ignore_ascii_case("authorization") {
        return "RCP_TOKEN".to_owned();
    }
    let snake: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
    format!("RCP_{snake}")
}

/// `url` with any user information (`user:password@`) replaced by `***@`.
pub fn redact_url(url: &str) -> String {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let authority_end = url[after_scheme..].find(['/', '?', '#']).map_or(url.len(), |i| after_scheme + i);
    match url[after_scheme..authority_end].rfind('@') {
        Some(at) => format!("{}***{}", &url[..after_scheme], &url[after_scheme + at..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_recognised_and_left_to_the_shell() {
        for secret in ["Authorization", "x-api-key", "X-Auth-Token", "Cookie", "RCP-Session", "X-Client-Secret"] {
            assert!(is_secret_header(secret), "{secret}");
        }
        for plain in ["X-Team", "Accept", "Content-Type", "X-Request-Id"] {
            assert!(!is_secret_header(plain), "{plain}");
        }
        assert_eq!(shell_var("Authorization"), "RCP_TOKEN");
        assert_eq!(shell_var("X-Api-Key"), "RCP_X_API_KEY");
    }

    #[test]
    fn user_information_is_cut_from_urls() {
        assert_eq!(redact_url("http://u:p@h:8080/rcp"), "http://***@h:8080/rcp");
        assert_eq!(redact_url("http://h:8080/rcp?x=a@b"), "http://h:8080/rcp?x=a@b");
        assert_eq!(redact_url("https://h"), "https://h");
    }
}
