//! Who is on the HTTP door: bearer tokens with a name and scopes
//! ([`Identity`], [`Scope`]), read from `--token-file` (one token, the
//! identity [`DEFAULT_IDENTITY`]) or `--tokens-file` (named tokens, a TOML
//! file of `[[token]]` tables), kept only as SHA-256 digests ([`Tokens`]),
//! re-read on demand ([`Tokens::reload`], SIGHUP in `serve`) without
//! touching sessions or jobs. The format and the rules are in
//! docs/operations.md#identities.
//!
//! A token never appears in a log line or an error: errors name the file,
//! the token's `name` and the line, never a token's text or its digest.
//! A token file other users may read, or the group or others may write,
//! is refused: another local user could read the token and act as its
//! identity, or add one. The group may read it (a Kubernetes Secret is
//! mounted `0440` with the pod's `fsGroup`).

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use http::{HeaderMap, header};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The identity of the one token of `--token-file`: `default`.
pub const DEFAULT_IDENTITY: &str = "default";

/// The identity of every request on an HTTP door without tokens (loopback,
/// commands without network): `anonymous`.
pub const ANONYMOUS_IDENTITY: &str = "anonymous";

/// The one identity of a stdio `serve`: `stdio`.
pub const STDIO_IDENTITY: &str = "stdio";

/// The identity of the command line (`toolhost call`): `local`.
pub use toolhost_runtime::LOCAL_IDENTITY;

/// Most bytes a token file may hold (64 KiB); one token at most 4 KiB.
pub const MAX_TOKENS_FILE_BYTES: u64 = 64 * 1024;

/// Most bytes of one token (4 KiB).
pub const MAX_TOKEN_BYTES: usize = 4096;

/// Most bytes of an identity's name (64): `[A-Za-z0-9._-]`.
pub const MAX_NAME_BYTES: usize = 64;

/// What an identity may do on the HTTP door.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// `tools/call`.
    Call,
    /// Being asked, and answering, the questions of its own calls: the
    /// permission questions, a plugin's elicitations and samplings (an
    /// `elicitation/create` or `sampling/createMessage` sent to its session,
    /// a 2026-07-28 retry's `inputResponses`). An identity without it is
    /// asked nothing.
    Answer,
    /// Reading metrics (`GET /metrics`): check it with [`Identity::allows`]
    /// on the [`Authenticated`] of the request.
    Metrics,
    /// Everything, and every identity's background sessions and questions.
    Admin,
}

impl Scope {
    /// Every scope, in the order of the docs.
    pub const ALL: [Scope; 4] = [Scope::Call, Scope::Answer, Scope::Metrics, Scope::Admin];

    /// Its name in a tokens file: `call`, `answer`, `metrics`, `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Call => "call",
            Scope::Answer => "answer",
            Scope::Metrics => "metrics",
            Scope::Admin => "admin",
        }
    }

    /// The scope named `name` ([`Scope::as_str`]), if any.
    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == name)
    }

    fn bit(self) -> u8 {
        1 << Scope::ALL.iter().position(|s| *s == self).unwrap_or(0)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of [`Scope`]s.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scopes(u8);

impl Scopes {
    /// What a token without `scopes` gets: all but `admin`.
    pub const DEFAULT: Scopes = Scopes(0b0111);

    /// No scope.
    pub const NONE: Scopes = Scopes(0);

    /// These scopes.
    pub fn of(scopes: &[Scope]) -> Scopes {
        Scopes(scopes.iter().fold(0, |bits, s| bits | s.bit()))
    }

    /// Whether `scope` is in the set; `admin` holds every scope.
    pub fn contains(self, scope: Scope) -> bool {
        self.0 & (scope.bit() | Scope::Admin.bit()) != 0
    }

    /// The names of the scopes in the set, in [`Scope::ALL`] order.
    pub fn names(self) -> Vec<&'static str> {
        Scope::ALL
            .into_iter()
            .filter(|s| self.0 & s.bit() != 0)
            .map(Scope::as_str)
            .collect()
    }
}

impl fmt::Debug for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

/// Who a request is: the name of its token (or [`STDIO_IDENTITY`],
/// [`ANONYMOUS_IDENTITY`], [`LOCAL_IDENTITY`]) and what it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    name: Arc<str>,
    scopes: Scopes,
}

impl Identity {
    /// An identity `name` with `scopes`.
    pub fn new(name: &str, scopes: Scopes) -> Identity {
        Identity {
            name: name.into(),
            scopes,
        }
    }

    /// Its name (a token's `name`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its name, shared.
    pub fn name_arc(&self) -> Arc<str> {
        self.name.clone()
    }

    /// Its scopes.
    pub fn scopes(&self) -> Scopes {
        self.scopes
    }

    /// Whether it holds `scope` (`admin` holds them all).
    pub fn allows(&self, scope: Scope) -> bool {
        self.scopes.contains(scope)
    }

    /// Whether it holds `admin`: it sees every identity's background
    /// sessions and questions.
    pub fn is_admin(&self) -> bool {
        self.allows(Scope::Admin)
    }

    /// The process crate's view of it: who owns the background sessions
    /// its calls start.
    pub fn principal(&self) -> toolhost_process::Principal {
        toolhost_process::Principal {
            name: self.name.clone(),
            admin: self.is_admin(),
        }
    }
}

/// What the HTTP door learned of a request before rmcp sees it, put in the
/// request's extensions (rmcp hands them to the handler with the request's
/// `http::request::Parts`): its identity and the peer's address.
#[derive(Debug, Clone)]
pub struct Authenticated {
    /// Who it is.
    pub identity: Identity,
    /// The TCP peer.
    pub remote: SocketAddr,
}

impl Authenticated {
    /// The [`Authenticated`] of a request the HTTP door passed, if any.
    /// This is the check for a scope: `Authenticated::of(&parts)
    /// .is_some_and(|a| a.identity.allows(Scope::Metrics))`.
    pub fn of(parts: &http::request::Parts) -> Option<&Authenticated> {
        parts.extensions.get::<Authenticated>()
    }
}

/// Errors reading a token file. None of them holds a token or a digest.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The file cannot be opened or read.
    #[error("cannot read the token file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Other users may read the file, or the group or others write it
    /// (docs/operations.md#identities: a token readable by another local
    /// user lets that user act as the identity).
    #[error(
        "refusing the token file {}: its mode is {mode:04o}, so other users of this machine \
         can read or change it; make it private to its owner: chmod 600 {}",
        path.display(),
        path.display()
    )]
    NotPrivate {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file is larger than [`MAX_TOKENS_FILE_BYTES`].
    #[error("the token file {} is larger than {MAX_TOKENS_FILE_BYTES} bytes", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// `--token-file` holds no token, or a token that is not visible ASCII.
    #[error("cannot use the token file {}: {reason}", path.display())]
    BadToken {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// `--tokens-file` is not TOML of the documented shape.
    #[error("the tokens file {} is not valid: line {line}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// The parser's complaint (never a token: `token` and `sha256` are
        /// checked here, not by the parser).
        message: String,
    },
    /// An entry is wrong: its name, its token, its digest or its scopes.
    #[error("the tokens file {}: token `{name}`: {reason}", path.display())]
    Entry {
        /// The file.
        path: PathBuf,
        /// The entry's `name` (escaped and cut as names echoed are).
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// An entry names a scope that does not exist.
    #[error(
        "the tokens file {}: token `{name}`: unknown scope `{scope}` (scopes: call, answer, \
         metrics, admin)",
        path.display()
    )]
    UnknownScope {
        /// The file.
        path: PathBuf,
        /// The entry's `name`.
        name: String,
        /// The scope as written (escaped and cut).
        scope: String,
    },
    /// An entry names `attach`, a scope earlier versions reserved and
    /// never used, now gone (docs/operations.md#identities: the control
    /// socket is local and needs no token).
    #[error(
        "the tokens file {}: token `{name}`: there is no `attach` scope any more (it never \
         allowed anything: `toolhost attach` uses the host's local control socket, which \
         admits the host's own user and needs no token); remove it from `scopes`",
        path.display()
    )]
    RemovedScope {
        /// The file.
        path: PathBuf,
        /// The entry's `name`.
        name: String,
    },
    /// Two entries have the same name.
    #[error("the tokens file {}: two tokens are named `{name}`", path.display())]
    DuplicateName {
        /// The file.
        path: PathBuf,
        /// The name.
        name: String,
    },
    /// Two entries have the same token (or digest).
    #[error("the tokens file {}: tokens `{first}` and `{second}` are the same token", path.display())]
    DuplicateToken {
        /// The file.
        path: PathBuf,
        /// The first entry's name.
        first: String,
        /// The second's.
        second: String,
    },
    /// The file has no `[[token]]`.
    #[error("the tokens file {} has no [[token]]", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// Where the tokens come from, as `serve` was told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// `--token-file`: one token, the identity [`DEFAULT_IDENTITY`] with
    /// [`Scopes::DEFAULT`].
    Single(PathBuf),
    /// `--tokens-file`: named tokens.
    Named(PathBuf),
}

impl TokenSource {
    /// The file.
    pub fn path(&self) -> &Path {
        match self {
            TokenSource::Single(p) | TokenSource::Named(p) => p,
        }
    }
}

/// One set of tokens, as digests.
#[derive(Clone)]
pub struct TokenSet {
    entries: Vec<([u8; 32], Identity)>,
}

impl fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|(_, i)| i))
            .finish()
    }
}

/// Why a request was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// No `Authorization` header.
    Missing,
    /// Not `Bearer`, or no known token.
    Invalid,
}

/// The file's text, read from one open descriptor whose mode is checked
/// first (no read by others, no write by the group or others).
fn read_private(path: &Path) -> Result<String, TokenError> {
    use std::os::unix::fs::PermissionsExt;
    let read = |source| TokenError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(read)?;
    let meta = file.metadata().map_err(read)?;
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o026 != 0 {
        return Err(TokenError::NotPrivate {
            path: path.to_path_buf(),
            mode,
        });
    }
    if meta.len() > MAX_TOKENS_FILE_BYTES {
        return Err(TokenError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    let mut bytes = Vec::new();
    (&mut file)
        .take(MAX_TOKENS_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read)?;
    if bytes.len() as u64 > MAX_TOKENS_FILE_BYTES {
        return Err(TokenError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    String::from_utf8(bytes).map_err(|_| TokenError::BadToken {
        path: path.to_path_buf(),
        reason: "the file is not UTF-8 text".into(),
    })
}

/// What is wrong with `token` as a bearer token, if anything: it must be
/// non-empty visible ASCII (RFC 6750 §2.1 `b64token`-safe), at most
/// [`MAX_TOKEN_BYTES`].
fn token_problem(token: &[u8]) -> Option<&'static str> {
    if token.is_empty() {
        Some("the token is empty")
    } else if token.len() > MAX_TOKEN_BYTES {
        Some("the token is longer than 4 KiB")
    } else if !token.iter().all(|b| b.is_ascii_graphic()) {
        Some("the token must be visible ASCII without spaces")
    } else {
        None
    }
}

/// One `[[token]]` table as written. `token` and `sha256` are raw TOML
/// values, checked here, so the parser's messages never quote them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryToml {
    name: String,
    #[serde(default)]
    token: Option<toml::Value>,
    #[serde(default)]
    sha256: Option<toml::Value>,
    #[serde(default)]
    scopes: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToml {
    #[serde(default)]
    token: Vec<EntryToml>,
}

fn parse_hex_digest(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let nibble = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        out[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

impl TokenSet {
    /// The one token of `--token-file` `path`: its text without surrounding
    /// whitespace, as [`DEFAULT_IDENTITY`] with [`Scopes::DEFAULT`].
    ///
    /// Errors: [`TokenError::Read`], [`TokenError::NotPrivate`],
    /// [`TokenError::TooLarge`], [`TokenError::BadToken`].
    pub fn single(path: &Path) -> Result<TokenSet, TokenError> {
        let text = read_private(path)?;
        let token = text.as_bytes().trim_ascii();
        if token.is_empty() {
            return Err(TokenError::BadToken {
                path: path.to_path_buf(),
                reason: "the file is empty".into(),
            });
        }
        if let Some(reason) = token_problem(token) {
            return Err(TokenError::BadToken {
                path: path.to_path_buf(),
                reason: reason.into(),
            });
        }
        Ok(TokenSet {
            entries: vec![(
                Sha256::digest(token).into(),
                Identity::new(DEFAULT_IDENTITY, Scopes::DEFAULT),
            )],
        })
    }

    /// The named tokens of `--tokens-file` `path`
    /// (docs/operations.md#identities).
    ///
    /// Errors: [`TokenError::Read`], [`TokenError::NotPrivate`],
    /// [`TokenError::TooLarge`], [`TokenError::Syntax`],
    /// [`TokenError::Entry`], [`TokenError::UnknownScope`],
    /// [`TokenError::RemovedScope`], [`TokenError::DuplicateName`],
    /// [`TokenError::DuplicateToken`], [`TokenError::Empty`].
    pub fn named(path: &Path) -> Result<TokenSet, TokenError> {
        let text = read_private(path)?;
        TokenSet::parse(path, &text)
    }

    fn parse(path: &Path, text: &str) -> Result<TokenSet, TokenError> {
        let file: FileToml = toml::from_str(text).map_err(|e| TokenError::Syntax {
            path: path.to_path_buf(),
            line: e.span().map_or(1, |s| {
                text[..s.start.min(text.len())].lines().count().max(1)
            }),
            message: toolhost_runtime::echo_message(e.message().trim_end()),
        })?;
        if file.token.is_empty() {
            return Err(TokenError::Empty {
                path: path.to_path_buf(),
            });
        }
        let mut entries: Vec<([u8; 32], Identity)> = Vec::new();
        let mut names: HashMap<String, ()> = HashMap::new();
        for entry in file.token {
            let shown = toolhost_runtime::echo_name(&entry.name);
            let wrong = |reason: String| TokenError::Entry {
                path: path.to_path_buf(),
                name: shown.clone(),
                reason,
            };
            if entry.name.is_empty()
                || entry.name.len() > MAX_NAME_BYTES
                || !entry
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
            {
                return Err(wrong(format!(
                    "a name is 1 to {MAX_NAME_BYTES} characters of A-Z a-z 0-9 . _ -"
                )));
            }
            if names.insert(entry.name.clone(), ()).is_some() {
                return Err(TokenError::DuplicateName {
                    path: path.to_path_buf(),
                    name: shown,
                });
            }
            let digest: [u8; 32] = match (&entry.token, &entry.sha256) {
                (Some(_), Some(_)) => {
                    return Err(wrong("give either `token` or `sha256`, not both".into()));
                }
                (None, None) => {
                    return Err(wrong(
                        "give `token = \"...\"` or `sha256 = \"<hex>\"`".into(),
                    ));
                }
                (Some(token), None) => {
                    let Some(token) = token.as_str() else {
                        return Err(wrong("`token` must be a string".into()));
                    };
                    if let Some(reason) = token_problem(token.as_bytes()) {
                        return Err(wrong(reason.into()));
                    }
                    Sha256::digest(token.as_bytes()).into()
                }
                (None, Some(hex)) => hex.as_str().and_then(parse_hex_digest).ok_or_else(|| {
                    wrong("`sha256` must be the 64 hex digits of the token's SHA-256".into())
                })?,
            };
            let scopes = match &entry.scopes {
                None => Scopes::DEFAULT,
                Some(list) => {
                    let mut parsed = Vec::new();
                    for s in list {
                        if s == "attach" {
                            return Err(TokenError::RemovedScope {
                                path: path.to_path_buf(),
                                name: shown.clone(),
                            });
                        }
                        parsed.push(Scope::parse(s).ok_or_else(|| TokenError::UnknownScope {
                            path: path.to_path_buf(),
                            name: shown.clone(),
                            scope: toolhost_runtime::echo_name(s),
                        })?);
                    }
                    Scopes::of(&parsed)
                }
            };
            if let Some((_, first)) = entries.iter().find(|(d, _)| bool::from(d.ct_eq(&digest))) {
                return Err(TokenError::DuplicateToken {
                    path: path.to_path_buf(),
                    first: first.name().to_string(),
                    second: shown,
                });
            }
            entries.push((digest, Identity::new(&entry.name, scopes)));
        }
        Ok(TokenSet { entries })
    }

    /// Reads `source`.
    ///
    /// Errors: as [`TokenSet::single`] or [`TokenSet::named`].
    pub fn load(source: &TokenSource) -> Result<TokenSet, TokenError> {
        match source {
            TokenSource::Single(p) => TokenSet::single(p),
            TokenSource::Named(p) => TokenSet::named(p),
        }
    }

    /// The identities, in file order.
    pub fn identities(&self) -> impl Iterator<Item = &Identity> {
        self.entries.iter().map(|(_, i)| i)
    }

    /// The identity whose token `Authorization` carries (`Bearer TOKEN`,
    /// the scheme case-insensitive, RFC 6750 §2.1). The presented token's
    /// SHA-256 is compared with every entry's in constant time, so neither
    /// the length of a token nor which entry matched shows in the timing.
    pub fn admit(&self, headers: &HeaderMap) -> Result<Identity, AuthFailure> {
        let value = headers
            .get(header::AUTHORIZATION)
            .ok_or(AuthFailure::Missing)?
            .as_bytes();
        let token = value
            .get(..7)
            .filter(|scheme| scheme.eq_ignore_ascii_case(b"bearer "))
            .map(|_| value[7..].trim_ascii())
            .ok_or(AuthFailure::Invalid)?;
        let digest: [u8; 32] = Sha256::digest(token).into();
        let mut found = None;
        for (d, identity) in &self.entries {
            if bool::from(d.ct_eq(&digest)) {
                found = Some(identity);
            }
        }
        found.cloned().ok_or(AuthFailure::Invalid)
    }
}

/// The tokens in force: a [`TokenSet`] from a [`TokenSource`], replaced
/// whole by [`Tokens::reload`].
pub struct Tokens {
    source: TokenSource,
    current: RwLock<Arc<TokenSet>>,
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokens")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Tokens {
    /// The tokens of `source`, read now.
    ///
    /// Errors: as [`TokenSet::load`].
    pub fn load(source: TokenSource) -> Result<Tokens, TokenError> {
        let set = TokenSet::load(&source)?;
        Ok(Tokens {
            source,
            current: RwLock::new(Arc::new(set)),
        })
    }

    /// Where they come from.
    pub fn source(&self) -> &TokenSource {
        &self.source
    }

    /// The set in force.
    pub fn current(&self) -> Arc<TokenSet> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reads the source again; the new set replaces the old one whole, for
    /// the next request (requests, sessions and calls already admitted are
    /// not touched). Returns the names now in force. On an error the old
    /// set stays.
    ///
    /// Errors: as [`TokenSet::load`].
    pub fn reload(&self) -> Result<Vec<String>, TokenError> {
        let set = TokenSet::load(&self.source)?;
        let names = set.identities().map(|i| i.name().to_string()).collect();
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(set);
        Ok(names)
    }

    /// The identity of a request's `Authorization` ([`TokenSet::admit`]).
    pub fn admit(&self, headers: &HeaderMap) -> Result<Identity, AuthFailure> {
        self.current().admit(headers)
    }
}

/// Re-reads `tokens` on every SIGHUP, for ever (`serve --http`; pending if
/// the handler cannot be installed).
pub async fn reload_on_hangup(tokens: Option<Arc<Tokens>>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return std::future::pending().await;
    };
    while hup.recv().await.is_some() {
        reload_tokens(tokens.as_deref());
    }
}

/// SIGHUP under `serve --http`: re-reads the token file or tokens file.
/// The new identities take effect for the next request; sessions and jobs
/// stay. A file that no longer reads keeps the identities in force, with a
/// warning (never the file's content).
fn reload_tokens(tokens: Option<&Tokens>) {
    let Some(tokens) = tokens else {
        tracing::warn!("SIGHUP: no --token-file or --tokens-file to re-read");
        return;
    };
    match tokens.reload() {
        Ok(names) => {
            tracing::info!(identities = ?names, "SIGHUP: re-read {}", tokens.source().path().display());
            crate::errln!(
                "toolhost: re-read {}: {} identities ({})",
                tokens.source().path().display(),
                names.len(),
                names.join(", ")
            );
        }
        Err(e) => {
            // Once on stderr: the warning is the log line (JSON with
            // `--log-format json`), no second plain copy.
            tracing::warn!("SIGHUP: keeping the identities in force: {e}");
        }
    }
}

/// A request refused for want of a scope ([`check_scopes`]).
#[derive(Debug)]
pub(crate) struct ScopeRefusal {
    /// The scope it needs.
    pub scope: Scope,
    /// What needs it, for the error text (`tools/call`).
    pub what: &'static str,
    /// The request's id.
    pub id: serde_json::Value,
}

/// Whether `identity` may send `message`: `tools/call` needs [`Scope::Call`],
/// and a `tools/call` or `prompts/get` carrying `inputResponses` (a
/// 2026-07-28 retry that answers its questions) [`Scope::Answer`] too.
/// Everything else (listing, reading resources, prompts, pings) needs no
/// scope.
pub(crate) fn check_scopes(
    identity: &Identity,
    message: &rmcp::service::RxJsonRpcMessage<rmcp::RoleServer>,
) -> Result<(), ScopeRefusal> {
    use rmcp::model::ClientRequest;
    let rmcp::model::JsonRpcMessage::Request(request) = message else {
        return Ok(());
    };
    let refuse = |scope, what| ScopeRefusal {
        scope,
        what,
        id: serde_json::to_value(&request.id).unwrap_or_default(),
    };
    let answers = match &request.request {
        ClientRequest::CallToolRequest(call) => {
            if !identity.allows(Scope::Call) {
                return Err(refuse(Scope::Call, "`tools/call`"));
            }
            call.params.input_responses.is_some()
        }
        ClientRequest::GetPromptRequest(get) => get.params.input_responses.is_some(),
        _ => false,
    };
    if answers && !identity.allows(Scope::Answer) {
        return Err(refuse(
            Scope::Answer,
            "answering a question (`inputResponses`)",
        ));
    }
    Ok(())
}

/// Who is behind one request of the MCP handler: its identity and the
/// event log's [`Actor`] for it (without the plugin, which the host adds).
pub(crate) struct Who {
    /// The identity (on stdio [`STDIO_IDENTITY`] with [`Scopes::DEFAULT`]).
    pub identity: Identity,
    /// As the event log records it.
    pub actor: toolhost_runtime::Actor,
}

/// The [`Who`] of a request: on HTTP the [`Authenticated`] the door put in
/// its extensions, on stdio (no HTTP parts) the one stdio identity. The
/// client is the request's own `_meta` `io.modelcontextprotocol/clientInfo`
/// (MCP 2026-07-28), else, for a legacy request, its session's `initialize`
/// `clientInfo` (a modern request without one has no client); each of
/// its strings escaped and cut ([`toolhost_runtime::echo_name`]).
pub(crate) fn who(context: &rmcp::service::RequestContext<rmcp::RoleServer>) -> Who {
    let parts = context.extensions.get::<http::request::Parts>();
    let (identity, transport, remote) = match parts {
        Some(parts) => match Authenticated::of(parts) {
            Some(a) => (a.identity.clone(), "http", Some(a.remote.to_string())),
            None => (
                Identity::new(ANONYMOUS_IDENTITY, Scopes::DEFAULT),
                "http",
                None,
            ),
        },
        None => (
            Identity::new(STDIO_IDENTITY, Scopes::DEFAULT),
            "stdio",
            None,
        ),
    };
    // A modern request stands alone: its client is what its own `_meta`
    // names, or none (rmcp's peer info for it is a stand-in that names
    // rmcp itself, not the client).
    let modern = super::era::is_modern(context);
    let client = context
        .meta
        .client_info()
        .or_else(|| {
            (!modern)
                .then(|| context.peer.peer_info().map(|p| p.client_info.clone()))
                .flatten()
        })
        .filter(|c| !c.name.is_empty())
        .map(|c| toolhost_runtime::ClientInfo {
            name: toolhost_runtime::echo_name(&c.name),
            version: toolhost_runtime::echo_name(&c.version),
        });
    let actor = toolhost_runtime::Actor {
        identity: identity.name().to_string(),
        transport: transport.to_string(),
        remote,
        client,
        plugin: None,
    };
    Who { identity, actor }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn auth(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        h
    }

    fn parse(text: &str) -> Result<TokenSet, TokenError> {
        TokenSet::parse(Path::new("/t.toml"), text)
    }

    #[test]
    fn named_tokens_admit_their_identity_with_their_scopes() {
        let digest = hex_digest("b-secret");
        let set = parse(&format!(
            "[[token]]\nname = \"alice\"\ntoken = \"a-secret\"\n\n[[token]]\nname = \"bob\"\n\
             sha256 = \"{}\"\nscopes = [\"call\"]\n",
            digest.to_uppercase()
        ))
        .unwrap();
        let alice = set.admit(&auth("Bearer a-secret")).unwrap();
        assert_eq!(alice.name(), "alice");
        assert_eq!(alice.scopes().names(), ["call", "answer", "metrics"]);
        assert!(!alice.is_admin());
        let bob = set.admit(&auth("bearer b-secret")).unwrap();
        assert_eq!(bob.name(), "bob");
        assert!(bob.allows(Scope::Call) && !bob.allows(Scope::Answer));
        assert_eq!(
            set.admit(&auth("Bearer a-secre")),
            Err(AuthFailure::Invalid)
        );
        assert_eq!(
            set.admit(&auth("Basic a-secret")),
            Err(AuthFailure::Invalid)
        );
        assert_eq!(set.admit(&HeaderMap::new()), Err(AuthFailure::Missing));
        assert!(!format!("{set:?}").contains("secret"));
    }

    fn hex_digest(token: &str) -> String {
        Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn admin_holds_every_scope() {
        let admin = Identity::new("root", Scopes::of(&[Scope::Admin]));
        assert!(Scope::ALL.iter().all(|s| admin.allows(*s)));
        let none = Identity::new("n", Scopes::of(&[]));
        assert!(Scope::ALL.iter().all(|s| !none.allows(*s)));
    }

    #[test]
    fn each_mistake_is_its_own_error_and_never_shows_a_token() {
        let cases: [(&str, &str); 10] = [
            (
                "[[token]]\nname = \"a\"\ntoken = \"SECRET1\"\nscopes = [\"call\", \"attach\"]\n",
                "token `a`: there is no `attach` scope any more",
            ),
            (
                "[[token]]\nname = \"a\"\ntoken = \"SECRET1\"\nscopes = [\"call\", \"rule\"]\n",
                "token `a`: unknown scope `rule`",
            ),
            (
                "[[token]]\nname = \"a\"\ntoken = \"SECRET1\"\n[[token]]\nname = \"a\"\ntoken = \"SECRET2\"\n",
                "two tokens are named `a`",
            ),
            (
                "[[token]]\nname = \"a\"\ntoken = \"SECRET1\"\n[[token]]\nname = \"b\"\ntoken = \"SECRET1\"\n",
                "tokens `a` and `b` are the same token",
            ),
            (
                "[[token]]\nname = \"a\"\ntoken = \"SECRET1\"\nsha256 = \"00\"\n",
                "token `a`: give either `token` or `sha256`, not both",
            ),
            (
                "[[token]]\nname = \"a\"\n",
                "token `a`: give `token = \"...\"` or `sha256 = \"<hex>\"`",
            ),
            (
                "[[token]]\nname = \"a\"\nsha256 = \"SECRET1zz\"\n",
                "token `a`: `sha256` must be the 64 hex digits of the token's SHA-256",
            ),
            (
                "[[token]]\nname = \"a\"\ntoken = 12345678\n",
                "token `a`: `token` must be a string",
            ),
            (
                "[[token]]\nname = \"a b\"\ntoken = \"SECRET1\"\n",
                "a name is 1 to 64 characters",
            ),
            ("", "has no [[token]]"),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{e:?} lacks {want:?}");
            assert!(
                !e.contains("SECRET") && !e.contains("12345678"),
                "{e:?} shows a token"
            );
        }
        // A syntax error names the line, not the text.
        let e = parse("[[token]]\nname = \"a\"\ntoken = \"SECRET1\nscopes = 3\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3"), "{e}");
        assert!(!e.contains("SECRET"), "{e}");
        let e = parse("[[token]]\nname = \"a\"\ntoken = \"SECRET1\"\nowner = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `owner`"), "{e}");
    }

    #[test]
    fn a_file_others_may_read_is_refused_and_reload_keeps_the_old_set() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.toml");
        std::fs::write(&path, "[[token]]\nname = \"a\"\ntoken = \"tok-a\"\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Tokens::load(TokenSource::Named(path.clone())).unwrap_err();
        assert!(
            matches!(e, TokenError::NotPrivate { mode: 0o644, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("chmod 600"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let tokens = Tokens::load(TokenSource::Named(path.clone())).unwrap();
        assert_eq!(tokens.admit(&auth("Bearer tok-a")).unwrap().name(), "a");
        std::fs::write(&path, "[[token]]\nname = \"a\"\n").unwrap();
        assert!(tokens.reload().is_err());
        assert_eq!(tokens.admit(&auth("Bearer tok-a")).unwrap().name(), "a");
        std::fs::write(&path, "[[token]]\nname = \"b\"\ntoken = \"tok-b\"\n").unwrap();
        assert_eq!(tokens.reload().unwrap(), ["b"]);
        assert_eq!(
            tokens.admit(&auth("Bearer tok-a")),
            Err(AuthFailure::Invalid)
        );
        assert_eq!(tokens.admit(&auth("Bearer tok-b")).unwrap().name(), "b");
        // --token-file: one identity, `default`.
        let single = dir.path().join("token");
        std::fs::write(&single, " one-token \n").unwrap();
        std::fs::set_permissions(&single, std::fs::Permissions::from_mode(0o600)).unwrap();
        let set = TokenSet::single(&single).unwrap();
        let default = set.admit(&auth("Bearer one-token")).unwrap();
        assert_eq!(
            (default.name(), default.scopes()),
            ("default", Scopes::DEFAULT)
        );
    }
}
