//! Scoped bearer tokens (§15.6): the tokens file, and the table the HTTP transport
//! authenticates against, which can be re-read while the server runs.
//!
//! The file holds one token a line, `SCOPES TOKEN`: SCOPES a comma-separated list of
//! `read`, `write` and `admin`, each of the first two either plain (every collection) or limited
//! to one collection as `read@fruit` ([`crate::access::Grant`]), TOKEN the secret itself or `sha256:<64 hex digits>`
//! of it (so the file need not hold the secret). Blank lines are skipped; `#` at the start of a
//! line or after a space starts a comment. A line that is not so is refused with its line
//! number, and no message ever repeats what the line holds.
//!
//! Only SHA-256 digests are kept in memory. A presented token is hashed once and its digest
//! compared with every entry, each comparison in constant time and none stopping early.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use sha2::{Digest, Sha256};
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};

use crate::service::access::{Grant, Scopes};

/// A SHA-256 digest.
pub(super) type Sha256Digest = [u8; 32];

/// The SHA-256 digest of `bytes`.
pub(super) fn digest(bytes: &[u8]) -> Sha256Digest {
    Sha256::digest(bytes).into()
}

/// Why a tokens file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokensError {
    /// The file could not be read.
    #[error("cannot read the tokens file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line is not `SCOPES TOKEN`; the message never repeats the line.
    #[error("{}:{line}: {reason}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// Its 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The file holds no token at all.
    #[error("the tokens file {} holds no token; refusing to serve without authentication", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The tokens were not read from a file, so there is nothing to re-read.
    #[error("these tokens were not read from a file; there is nothing to reload")]
    NotAFile,
}

/// One token: its digest and what it grants.
#[derive(Clone)]
struct Entry {
    digest: Sha256Digest,
    grant: Grant,
}

/// Bearer tokens and the scopes each grants, shared by every clone: [`AccessTokens::reload`]
/// on one clone (the one the binary keeps for SIGHUP) changes what the router it was given to
/// accepts from the next request on, without touching open connections or sessions.
///
/// Its `Debug` output names how many tokens it holds, never a token or a digest.
#[derive(Clone)]
pub struct AccessTokens {
    shared: Arc<Shared>,
}

struct Shared {
    path: Option<PathBuf>,
    table: RwLock<Arc<[Entry]>>,
}

impl AccessTokens {
    /// Reads the tokens file at `path`: one `SCOPES TOKEN` a line, SCOPES a comma-separated
    /// list of `read`, `write` (each plain or `@collection`) and `admin`, TOKEN the secret or `sha256:<64 hex digits>` of it; blank
    /// lines skipped, `#` at the start or after a space starts a comment. A bad line is refused
    /// with its number (never its content), and a file without a single token is refused, so
    /// that a mistake never starts a server without authentication.
    pub fn load(path: impl Into<PathBuf>) -> Result<Self, TokensError> {
        let path = path.into();
        let entries = read(&path)?;
        if entries.is_empty() {
            return Err(TokensError::Empty { path });
        }
        Ok(Self::from_entries(Some(path), entries))
    }

    /// Tokens from the text of a tokens file (as [`AccessTokens::load`] reads it), with no file
    /// to re-read. Errors name the line as `<text>:N`.
    pub fn parse(text: &str) -> Result<Self, TokensError> {
        let entries = parse(Path::new("<text>"), text)?;
        Ok(Self::from_entries(None, entries))
    }

    /// Tokens that grant every scope (`--tokens-env`).
    pub fn full_access<S: AsRef<str>>(tokens: impl IntoIterator<Item = S>) -> Self {
        let entries = tokens.into_iter().map(|t| Entry { digest: digest(t.as_ref().as_bytes()), grant: Grant::all() });
        Self::from_entries(None, entries.collect())
    }

    fn from_entries(path: Option<PathBuf>, entries: Vec<Entry>) -> Self {
        Self { shared: Arc::new(Shared { path, table: RwLock::new(entries.into()) }) }
    }

    /// Re-reads the file the tokens came from and, if it is valid, puts it in force for every
    /// request from now on; returns how many tokens it holds. A file that cannot be read or
    /// has a bad line changes nothing (the previous tokens stay). An empty file revokes every
    /// token: authentication stays required and every request is refused.
    pub fn reload(&self) -> Result<usize, TokensError> {
        let path = self.shared.path.as_ref().ok_or(TokensError::NotAFile)?;
        let entries = read(path)?;
        let n = entries.len();
        *self.shared.table.write().unwrap_or_else(|p| p.into_inner()) = entries.into();
        Ok(n)
    }

    /// The file the tokens were read from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.shared.path.as_deref()
    }

    /// How many tokens are in force.
    pub fn len(&self) -> usize {
        self.table().len()
    }

    /// Whether no token is in force (every request is refused).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn table(&self) -> Arc<[Entry]> {
        Arc::clone(&self.shared.table.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Whether some token's grant reaches only named collections.
    pub fn has_collection_grants(&self) -> bool {
        self.table().iter().any(|e| e.grant.is_collection_limited())
    }

    /// The grant of the token whose digest is `presented`; `None` when no token matches.
    /// Every entry is compared, each in constant time and none stopping early; only the
    /// position of the match (never how much of a digest matched) decides what is read after.
    pub(super) fn grant_of(&self, presented: &Sha256Digest) -> Option<Grant> {
        let table = self.table();
        let mut found = Choice::from(0);
        let mut at = 0u32;
        for (i, entry) in table.iter().enumerate() {
            let matched = entry.digest.ct_eq(presented);
            at = u32::conditional_select(&at, &(i as u32), matched);
            found |= matched;
        }
        bool::from(found).then(|| table[at as usize].grant.clone())
    }
}

impl fmt::Debug for AccessTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessTokens").field("path", &self.shared.path).field("tokens", &self.len()).finish()
    }
}

fn read(path: &Path) -> Result<Vec<Entry>, TokensError> {
    let text = std::fs::read_to_string(path).map_err(|source| TokensError::Read { path: path.to_owned(), source })?;
    parse(path, &text)
}

/// The entries of a tokens file's `text`; `path` names it in errors.
fn parse(path: &Path, text: &str) -> Result<Vec<Entry>, TokensError> {
    let mut entries: Vec<(usize, Entry)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let refuse = |reason: &str| TokensError::Line { path: path.to_owned(), line, reason: reason.to_owned() };
        let content = strip_comment(raw);
        let mut fields = content.split_whitespace();
        let Some(scopes) = fields.next() else { continue };
        let (Some(token), None) = (fields.next(), fields.next()) else {
            return Err(refuse("expected two fields, 'SCOPES TOKEN' (SCOPES like read,write)"));
        };
        let grant = Grant::parse(scopes)
            .map_err(|why| refuse(&format!("the first field must be scopes, separated by commas, no spaces: {why}")))?;
        if grant.scopes() == Scopes::NONE {
            return Err(refuse("the line grants no scope"));
        }
        let digest = match token.strip_prefix("sha256:") {
            Some(hex) => decode_hex(hex).ok_or_else(|| refuse("'sha256:' must be followed by 64 hex digits"))?,
            None => digest(token.as_bytes()),
        };
        if let Some((first, _)) = entries.iter().find(|(_, e)| e.digest == digest) {
            return Err(refuse(&format!("the same token is already on line {first}")));
        }
        entries.push((line, Entry { digest, grant }));
    }
    Ok(entries.into_iter().map(|(_, e)| e).collect())
}

/// `line` without its comment: from a `#` at its start or after whitespace.
fn strip_comment(line: &str) -> &str {
    let mut prev_space = true;
    for (at, c) in line.char_indices() {
        if c == '#' && prev_space {
            return &line[..at];
        }
        prev_space = c.is_whitespace();
    }
    line
}

/// 64 hex digits as 32 bytes.
fn decode_hex(hex: &str) -> Option<Sha256Digest> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let nibble = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        out[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::access::Scope;

    fn scopes_of(tokens: &AccessTokens, token: &str) -> Scopes {
        tokens.grant_of(&digest(token.as_bytes())).map_or(Scopes::NONE, |g| g.scopes())
    }

    fn hex(d: &Sha256Digest) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn lines_give_each_token_its_scopes() {
        let text = format!(
            "# who may do what\n\nread reader-token\nread,write  writer-token # the ingestion job\nadmin sha256:{}\n",
            hex(&digest(b"scraper-token"))
        );
        let tokens = AccessTokens::parse(&text).expect("valid");
        assert_eq!(tokens.len(), 3);
        assert_eq!(scopes_of(&tokens, "reader-token"), Scopes::NONE.with(Scope::Read));
        assert_eq!(scopes_of(&tokens, "writer-token"), Scopes::NONE.with(Scope::Read).with(Scope::Write));
        assert_eq!(scopes_of(&tokens, "scraper-token"), Scopes::NONE.with(Scope::Admin));
        assert_eq!(scopes_of(&tokens, "reader-toke"), Scopes::NONE);
        assert_eq!(scopes_of(&tokens, ""), Scopes::NONE);
        assert!(!format!("{tokens:?}").contains("token\""), "{tokens:?}");
    }

    #[test]
    fn a_line_may_limit_its_scopes_to_collections() {
        let tokens = AccessTokens::parse("read@fruit,write@fruit fruit-token\nread everything\n").expect("valid");
        assert!(tokens.has_collection_grants());
        let fruit = tokens.grant_of(&digest(b"fruit-token")).expect("known");
        assert!(fruit.reaches(Scope::Write, "fruit") && !fruit.reaches(Scope::Read, "veg"));
        let all = tokens.grant_of(&digest(b"everything")).expect("known");
        assert!(all.reaches(Scope::Read, "veg") && !all.is_collection_limited());
        assert!(!AccessTokens::parse("read plain").expect("valid").has_collection_grants());
        for bad in ["admin@ops SECRET\n", "read,read@fruit SECRET\n", "read@ SECRET\n"] {
            let err = AccessTokens::parse(bad).expect_err(bad).to_string();
            assert!(err.contains("<text>:1:") && !err.contains("SECRET"), "{err}");
        }
    }

    #[test]
    fn a_hash_inside_a_token_is_not_a_comment() {
        let tokens = AccessTokens::parse("read abc#def").expect("valid");
        assert_eq!(scopes_of(&tokens, "abc#def"), Scopes::NONE.with(Scope::Read));
    }

    #[test]
    fn bad_lines_are_refused_with_their_number_and_never_echoed() {
        for (text, line) in [
            ("read good\nSECRET-ALONE\n", 2),
            ("read good\n\nroot SECRET-1\n", 3),
            ("SECRET-2 read\n", 1),
            ("read SECRET-3 extra\n", 1),
            ("read sha256:SECRET\n", 1),
            ("read SECRET-4\nwrite SECRET-4\n", 2),
            ("read, write SECRET-5\n", 1),
        ] {
            let err = AccessTokens::parse(text).expect_err(text);
            let TokensError::Line { line: got, .. } = &err else { panic!("{err:?}") };
            assert_eq!(*got, line, "{text:?}: {err}");
            let message = err.to_string();
            assert!(!message.contains("SECRET"), "the message repeats the line: {message}");
            assert!(message.contains(&format!(":{line}:")), "{message}");
        }
    }

    #[test]
    fn a_file_is_reloaded_and_a_bad_one_changes_nothing() {
        let dir = std::env::temp_dir().join(format!("rcp-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("tokens");
        std::fs::write(&path, "read,write one\n").expect("write");
        assert!(matches!(AccessTokens::load(dir.join("missing")), Err(TokensError::Read { .. })));
        let tokens = AccessTokens::load(&path).expect("load");
        let router_copy = tokens.clone();
        assert_eq!(scopes_of(&router_copy, "one").bits(), 3);
        std::fs::write(&path, "read one\nread two\n").expect("write");
        assert_eq!(tokens.reload().expect("reload"), 2);
        assert_eq!(scopes_of(&router_copy, "one"), Scopes::NONE.with(Scope::Read));
        std::fs::write(&path, "read one\nbogus\n").expect("write");
        assert!(tokens.reload().is_err());
        assert_eq!(scopes_of(&router_copy, "two"), Scopes::NONE.with(Scope::Read), "the previous tokens stay");
        std::fs::write(&path, "# everyone revoked\n").expect("write");
        assert_eq!(tokens.reload().expect("reload"), 0);
        assert_eq!(scopes_of(&router_copy, "one"), Scopes::NONE);
        assert!(matches!(AccessTokens::load(&path), Err(TokensError::Empty { .. })), "empty at start-up");
        assert!(matches!(AccessTokens::full_access(["x"]).reload(), Err(TokensError::NotAFile)));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
