//! MCP over Streamable HTTP (MCP 2025-11-25, "Transports", "Streamable
//! HTTP"): `toolhost serve --http ADDR`, one endpoint, [`MCP_PATH`].
//!
//! rmcp's server transport ([`StreamableHttpService`] with a
//! [`LocalSessionManager`]) speaks the protocol: `POST` carries one JSON-RPC
//! message (a request is answered with an SSE stream, a notification or
//! response with `202`), `GET` opens the session's standalone SSE stream,
//! `DELETE` ends the session. Each `initialize` makes a session with its own
//! `Mcp-Session-Id` (a UUID) and its own [`McpServer`] over the one shared
//! [`Host`]. Every SSE stream starts with a priming event (an event id and
//! `retry: 3000`), and every event carries an id, so a client whose stream
//! broke resumes it with `GET` and `Last-Event-ID` ("Resumability and
//! Redelivery"); events of finished requests are kept for 60 s.
//!
//! In front of it, this module ([`HttpServer`]) checks, in this order:
//!
//! 0. The peer, once per connection: a client on this machine (the kernel
//!    lists its socket in `/proc/net/tcp{,6}`: its owner's uid, its inode)
//!    whose socket one of the host's own commands holds is refused (`403`),
//!    in every sandbox mode, so a command that reads a token (under
//!    `full-access` nothing is hidden) still cannot use the door. Without
//!    tokens (loopback only) the peer's uid is its credential: only a client
//!    socket of the host's own user is served, so other users of the machine
//!    are refused (`403`) as `SO_PEERCRED` refuses them on the control socket.
//! 1. DNS rebinding ("Security Warning"): when bound to a loopback address,
//!    the `Host` header must name a loopback host (`localhost` or a loopback
//!    IP literal: `127.0.0.1`, the bound `127.0.0.2`, `[::1]`, any port), and
//!    an `Origin` header, if present, must be `http(s)://` one of them;
//!    otherwise `403 Forbidden`. On another address
//!    (which needs a token), `Origin` must be loopback or name the `Host`.
//! 2. The bearer token, when tokens are configured (required off loopback):
//!    `Authorization: Bearer TOKEN`, one of `--token-file`'s or
//!    `--tokens-file`'s ([`identity`]: SHA-256 of both, compared in
//!    constant time), whose name is the request's [`Identity`]; otherwise
//!    `401` with `WWW-Authenticate: Bearer realm="toolhost"`. The token is
//!    never logged. Without tokens, every request is [`ANONYMOUS_IDENTITY`].
//! 3. The path: [`health::HEALTH_PATH`], [`health::READY_PATH`] and
//!    [`health::INFO_PATH`] are answered by [`health`] without a token (so
//!    before step 2; they reveal nothing sensitive); after it
//!    [`metrics::METRICS_PATH`] is answered by [`metrics`] (the identity needs
//!    the `metrics` scope, else `403`); anything else but
//!    [`MCP_PATH`] is `404`.
//! 4. The session: a legacy session belongs to the identity whose
//!    `initialize` made it ([`SessionOwners`]). A request (`POST`, `GET`,
//!    `DELETE`) naming a session another identity made is answered exactly as
//!    one naming no session rmcp knows (`404 Not Found: Session not found`;
//!    `202` for a `DELETE`, which ends nothing), so it learns nothing of the
//!    session, cannot post into it (its answers to the session's
//!    elicitations, its cancels), read its streams or end it. MCP 2025-11-25
//!    "Security Best Practices", "Session Hijacking": servers "MUST NOT use
//!    sessions for authentication" and "SHOULD bind session IDs to user
//!    specific information"; "Transports", "Session Management": a session
//!    the server does not serve is `404`. `admin` does not change this: a
//!    session is one client's conversation, and an admin acts on other
//!    identities' jobs and questions from its own session
//!    (docs/operations.md#identities).
//! 5. The body: at most [`MAX_MESSAGE_BYTES`], else `413` with a JSON-RPC
//!    `-32600` body. A `POST` body is classified like a stdio line
//!    ([`super::classify`]): unparsable JSON is `400` with `-32700`, an
//!    invalid message `400` with `-32600` (the spec: "If the server cannot
//!    accept the input, it MUST return an HTTP error status code"), a known
//!    method with malformed params `200` with `-32602`, a method 2026-07-28
//!    removed sent with modern `_meta` `404` with `-32601`, and a malformed
//!    notification `202`. A request its identity lacks the scope for
//!    ([`identity::check_scopes`]: `tools/call` needs `call`, a retry's
//!    `inputResponses` `answer`) is `403` with `WWW-Authenticate: Bearer
//!    error="insufficient_scope"` and a JSON-RPC error [`codes::FORBIDDEN`].
//! 6. The drain ([`Drain::admit`]): during a stop, new work (`tools/call`,
//!    `resources/read`, `prompts/get`, `initialize`) is `503` with
//!    `Retry-After` and a JSON-RPC error [`codes::STOPPING`]; the work let
//!    through is counted until its response body is sent, which the drain
//!    waits for.
//!
//! What passes goes to rmcp with an [`Authenticated`] (the identity and the
//! peer's address) in the request's extensions, which the handler reads
//! ([`identity::who`]) for the call's principal and the event log's actor.
//!
//! A legacy request other than `initialize` without a session id is `400`
//! and one for an unknown or ended session `404` (rmcp, as 2025-11-25
//! "Session Management" says). A modern request (MCP 2026-07-28: its `_meta`
//! names the protocol version, or it is `server/discover`) needs no session:
//! rmcp serves it on its own, after checking that `MCP-Protocol-Version`
//! matches `_meta` and `Mcp-Method` / `Mcp-Name` the body (`400`, `-32020`
//! `HeaderMismatch` otherwise).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderValue, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited, combinators::BoxBody};
use hyper::body::{Bytes, Incoming as IncomingBody};
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use toolhost_runtime::Host;

use super::drain::{Admission, Counted, Door, Drain};
use super::health::{self, Readiness};
use super::identity::{
    self, ANONYMOUS_IDENTITY, AuthFailure, Authenticated, Identity, Scopes, TokenError, Tokens,
};
use super::metrics::{self, HttpMetrics};
use super::{
    CancelledSet, Incoming, MAX_MESSAGE_BYTES, McpServer, Shared, classify, codes, record_cancel,
};
use crate::jsonrpc;

/// The one MCP endpoint's path: `/mcp`.
pub const MCP_PATH: &str = "/mcp";

/// How long shutdown waits for open connections to finish after the
/// sessions were ended (5 s).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How long a client may take to send a request's headers (30 s; slow
/// clients are cut off).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a request body may take to arrive, in full (30 s); a slower one
/// is answered `408 Request Timeout`.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Most HTTP connections open at once (1,024); further ones wait in the
/// kernel's accept queue until one closes, so a flood of idle connections
/// cannot use up the host's file descriptors.
pub const MAX_CONNECTIONS: usize = 1024;

/// The header naming a legacy session (MCP 2025-11-25 "Transports").
const SESSION_HEADER: &str = "mcp-session-id";

/// What a request naming another identity's session carries to rmcp in its
/// place: no session rmcp mints (its ids are UUIDs) is named so, so rmcp
/// answers it as an unknown session.
const FOREIGN_SESSION: &str = "not-this-identity-s-session";

/// The host names a loopback-bound server accepts in `Host` and `Origin`.
const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Errors of [`HttpOptions::check`] and [`HttpServer::bind`].
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The address is not loopback and no token was given.
    #[error(
        "refusing to serve MCP over HTTP on {addr}: it is not a loopback address, so every \
         request must carry a bearer token; pass --token-file PATH (a file holding the token) \
         or bind 127.0.0.1 / [::1]"
    )]
    TokenRequired {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// Loopback without a token while the commands plugins start may use the
    /// network: one of them could open its own MCP session and answer the
    /// permission prompts its own command raised.
    #[error(
        "refusing to serve MCP over HTTP on {addr} without a token: commands may use the \
         network ({why}), so a command could connect to this server and answer its own \
         permission prompts; pass --token-file PATH (a file holding the token, outside the \
         workspace), or leave the network closed to commands"
    )]
    TokenRequiredForNetwork {
        /// The address asked for.
        addr: SocketAddr,
        /// Which setting opens the network (`--allow-network`, `--sandbox full-access`).
        why: String,
    },
    /// The token file or tokens file cannot be used (never names a token).
    #[error(transparent)]
    Tokens(#[from] TokenError),
    /// Binding the listening socket failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}

/// What `toolhost serve --http` was asked for.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen, e.g. `127.0.0.1:8765` (port 0: any free port).
    pub addr: SocketAddr,
    /// The bearer tokens a request may carry, each an [`Identity`];
    /// required unless `addr` is loopback and commands cannot reach the
    /// network. Without them every request is [`ANONYMOUS_IDENTITY`] with
    /// [`Scopes::DEFAULT`].
    pub tokens: Option<Arc<Tokens>>,
    /// Why the commands plugins start may use the network (e.g.
    /// `--allow-network`), if they may; `None`: they cannot connect to
    /// anything, this server included.
    pub commands_network: Option<String>,
}

impl HttpOptions {
    /// Checks the options before anything starts: a non-loopback address
    /// without a token is refused, and so is loopback without a token when
    /// commands may use the network (a command could drive the server).
    ///
    /// Errors: [`HttpError::TokenRequired`], [`HttpError::TokenRequiredForNetwork`].
    pub fn check(&self) -> Result<(), HttpError> {
        if self.tokens.is_some() {
            return Ok(());
        }
        if !self.addr.ip().is_loopback() {
            return Err(HttpError::TokenRequired { addr: self.addr });
        }
        if let Some(why) = &self.commands_network {
            return Err(HttpError::TokenRequiredForNetwork {
                addr: self.addr,
                why: why.clone(),
            });
        }
        Ok(())
    }
}

/// A bound, not yet serving, Streamable HTTP front door.
pub struct HttpServer {
    listener: tokio::net::TcpListener,
    local_addr: SocketAddr,
    options: HttpOptions,
}

impl HttpServer {
    /// Checks `options` ([`HttpOptions::check`]) and binds the socket.
    ///
    /// Errors: [`HttpError::TokenRequired`], [`HttpError::Bind`].
    pub async fn bind(options: HttpOptions) -> Result<HttpServer, HttpError> {
        options.check()?;
        let addr = options.addr;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| HttpError::Bind { addr, source })?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| HttpError::Bind { addr, source })?;
        Ok(HttpServer {
            listener,
            local_addr,
            options,
        })
    }

    /// The address bound (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The tokens it admits (`None`: none configured), for
    /// [`Tokens::reload`].
    pub fn tokens(&self) -> Option<Arc<Tokens>> {
        self.options.tokens.clone()
    }

    /// The endpoint's URL, e.g. `http://127.0.0.1:8765/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{MCP_PATH}", self.local_addr)
    }

    /// Serves MCP for `host` until `stop` resolves (`serve` passes the end
    /// of `drain`, [`Drain::closed`]); then ends every session (their SSE
    /// streams close), stops accepting, and waits up to [`SHUTDOWN_GRACE`]
    /// for open connections. During the drain it keeps accepting: `/ready`
    /// says `503` and new work is refused ([`Drain::admit`]). Calls still in
    /// progress are left running: the caller ends their processes (as
    /// `serve` does for stdio, `Sessions::shutdown`).
    pub async fn serve(self, host: Arc<Host>, drain: Arc<Drain>, stop: impl Future<Output = ()>) {
        let cancelled = CancelledSet::default();
        let shared = Shared::new(host, cancelled.clone(), &drain);
        let sessions_ct = CancellationToken::new();
        let loopback = self.local_addr.ip().is_loopback();
        let mut config = StreamableHttpServerConfig::default()
            .with_cancellation_token(sessions_ct.clone())
            .with_max_request_body_bytes(MAX_MESSAGE_BYTES);
        // Defense in depth: rmcp checks Host and Origin too.
        config = if loopback {
            // The loopback names plus the address bound (e.g. 127.0.0.2).
            let bound = match self.local_addr.ip() {
                std::net::IpAddr::V4(ip) => ip.to_string(),
                std::net::IpAddr::V6(ip) => ip.to_string(),
            };
            let mut hosts: Vec<String> = LOOPBACK_NAMES.iter().map(|h| h.to_string()).collect();
            hosts.push(bound.clone());
            let bound_origin = match self.local_addr.ip() {
                std::net::IpAddr::V6(_) => format!("[{bound}]"),
                std::net::IpAddr::V4(_) => bound,
            };
            config.with_allowed_hosts(hosts).with_allowed_origins(
                ["http", "https"]
                    .iter()
                    .flat_map(|s| {
                        ["localhost", "127.0.0.1", "[::1]", bound_origin.as_str()]
                            .map(|h| format!("{s}://{h}:*"))
                    })
                    .collect::<Vec<_>>(),
            )
        } else {
            config.disable_allowed_hosts()
        };
        let factory_shared = shared.clone();
        let manager = Arc::new(LocalSessionManager::default());
        let metrics = HttpMetrics::new(&shared.host, manager.clone());
        let owners = SessionOwners::new(manager.clone());
        let mcp = StreamableHttpService::new(
            move || Ok(McpServer::new(factory_shared.clone())),
            manager,
            config,
        );
        let readiness = Arc::new(Readiness::new(drain.clone()));
        let front = Arc::new(Front {
            mcp,
            host: shared.host.clone(),
            readiness,
            drain,
            loopback,
            tokens: self.options.tokens.clone(),
            cancelled,
            metrics,
            owners,
        });
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let mut stop = std::pin::pin!(stop);
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        loop {
            let slot = tokio::select! {
                s = slots.clone().acquire_owned() => s,
                () = &mut stop => break,
            };
            let Ok(slot) = slot else { break };
            let accepted = tokio::select! {
                a = self.listener.accept() => a,
                () = &mut stop => break,
            };
            let (stream, remote) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // EMFILE and the like: back off a little, keep serving.
                    tracing::warn!("accepting an HTTP connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let front = front.clone();
            let local = stream.local_addr().unwrap_or(self.local_addr);
            // Step 0, once per connection, on its first request.
            let peer = Arc::new(tokio::sync::OnceCell::new());
            let service = hyper::service::service_fn(move |request| {
                let front = front.clone();
                let peer = peer.clone();
                async move {
                    let refused = peer.get_or_init(|| front.check_peer(local, remote)).await;
                    Ok::<_, Infallible>(match refused {
                        Some(why) => front.refuse_peer(why),
                        None => front.handle(request, remote).await,
                    })
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            let connection = graceful.watch(connection);
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!("HTTP connection ended: {e}");
                }
                drop(slot);
            });
        }
        // Readiness went false when the drain began (`Readiness::check`).
        tracing::info!("stopping the HTTP front door: ending MCP sessions");
        sessions_ct.cancel();
        drop(self.listener);
        if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("HTTP connections still open after {SHUTDOWN_GRACE:?}; leaving them");
        }
    }
}

/// One check of [`Front::check_peer`], run on the peer-check thread.
type PeerCheck = Box<dyn FnOnce() + Send>;

/// The peer-check thread's queue: one thread for the process, started at
/// the first connection, checking one connection at a time (a thread per
/// check would give the allocator an arena per thread).
fn peer_checks() -> &'static std::sync::mpsc::Sender<PeerCheck> {
    static QUEUE: std::sync::OnceLock<std::sync::mpsc::Sender<PeerCheck>> =
        std::sync::OnceLock::new();
    QUEUE.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<PeerCheck>();
        let started = std::thread::Builder::new()
            .name("toolhost-peer-check".into())
            .spawn(move || {
                while let Ok(check) = rx.recv() {
                    // A check that panics fails its connection (its answer
                    // channel drops), never the thread.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(check));
                }
            });
        if let Err(e) = started {
            tracing::warn!("cannot start the peer-check thread: {e}");
        }
        tx
    })
}

/// Which identity made each legacy session: the name of the identity whose
/// `initialize` rmcp answered with the session's `Mcp-Session-Id` (module
/// docs, step 4). Entries of sessions rmcp no longer has are dropped as new
/// ones come.
struct SessionOwners {
    owners: std::sync::Mutex<HashMap<String, Arc<str>>>,
    manager: Arc<LocalSessionManager>,
}

impl SessionOwners {
    fn new(manager: Arc<LocalSessionManager>) -> SessionOwners {
        SessionOwners {
            owners: std::sync::Mutex::default(),
            manager,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<str>>> {
        self.owners.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `identity` made `session` (a session nobody made, as far as
    /// this door knows, is nobody's).
    fn owned_by(&self, session: &str, identity: &Identity) -> bool {
        self.lock()
            .get(session)
            .is_some_and(|owner| **owner == *identity.name())
    }

    /// `identity` made `session`; sessions rmcp has ended are forgotten.
    async fn made(&self, session: &str, identity: &Identity) {
        let live: std::collections::HashSet<String> = (self.manager.sessions.read().await)
            .keys()
            .map(|k| k.to_string())
            .collect();
        let mut owners = self.lock();
        owners.retain(|s, _| live.contains(s));
        owners.insert(session.to_string(), identity.name_arc());
    }

    /// `session` was ended by its owner's `DELETE`.
    fn ended(&self, session: &str) {
        self.lock().remove(session);
    }
}

type Body = BoxBody<Bytes, Infallible>;

/// A response that ends the request before rmcp sees it (boxed: a
/// `Response` is large).
type Refused = Box<Response<Body>>;

/// The checks in front of rmcp (module docs).
struct Front {
    mcp: StreamableHttpService<McpServer, LocalSessionManager>,
    host: Arc<Host>,
    readiness: Arc<Readiness>,
    drain: Arc<Drain>,
    loopback: bool,
    tokens: Option<Arc<Tokens>>,
    cancelled: CancelledSet,
    metrics: HttpMetrics,
    owners: SessionOwners,
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// `503 Service Unavailable` for a request the drain refused: `Retry-After`
/// (RFC 9110 §10.2.3) `retry_after` seconds and the JSON-RPC error `body`.
fn unavailable(body: &Value, retry_after: u64) -> Response<Body> {
    let mut response = json_response(StatusCode::SERVICE_UNAVAILABLE, body);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    response
}

/// `response`, holding `counted` until its body is sent (or dropped).
fn counted_until_sent(response: Response<Body>, counted: Counted) -> Response<Body> {
    response.map(|body| {
        body.map_frame(move |frame| {
            let _held = &counted;
            frame
        })
        .boxed()
    })
}

fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    let mut response =
        Response::new(Full::new(Bytes::from(serde_json::to_vec(body).unwrap_or_default())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// `403 Forbidden` for a request whose identity lacks `refused.scope`
/// (RFC 6750 §3.1 `insufficient_scope`, as MCP 2025-11-25 "Authorization",
/// "Scope Challenge Handling" answers it), with a JSON-RPC error
/// [`codes::FORBIDDEN`] naming the identity and the scope.
fn insufficient_scope(identity: &Identity, refused: identity::ScopeRefusal) -> Response<Body> {
    let scope = refused.scope.as_str();
    let mut response = json_response(
        StatusCode::FORBIDDEN,
        &jsonrpc::error(
            &refused.id,
            codes::FORBIDDEN,
            format!(
                "Forbidden: the identity `{}` lacks the `{scope}` scope, which {} needs",
                identity.name(),
                refused.what
            ),
        ),
    );
    if let Ok(value) = HeaderValue::from_str(&format!(
        "Bearer realm=\"toolhost\", error=\"insufficient_scope\", scope=\"{scope}\""
    )) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    tracing::warn!(
        identity = identity.name(),
        scope,
        "refused a request: insufficient scope"
    );
    response
}

/// Whether a `Host` or `Origin` host (normalized) names this machine's
/// loopback: `localhost` or a loopback IP literal (`127.0.0.0/8`, `::1`).
/// An IP literal cannot be rebound by DNS, so every loopback one is safe
/// (a server bound to `127.0.0.2` is reached as `127.0.0.2`).
fn is_loopback_name(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `host` without brackets, lowercase.
fn normalize(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

impl Front {
    /// The answer to `request`, counted by status; an SSE stream is counted
    /// open until its body is dropped.
    async fn handle(&self, request: Request<IncomingBody>, remote: SocketAddr) -> Response<Body> {
        let response = match self.handle_checked(request, remote).await {
            Ok(response) => response,
            Err(refused) => *refused,
        };
        self.metrics.response(response.status().as_u16());
        let is_sse = response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        if !is_sse {
            return response;
        }
        let open = self.metrics.stream_opened();
        response.map(|body| {
            body.map_frame(move |frame| {
                let _open = &open;
                frame
            })
            .boxed()
        })
    }

    /// Why the client of a connection from `remote` to `local` is refused
    /// (module docs, step 0), if it is: found on this machine
    /// ([`toolhost_process::tcp_client`]), its socket held by one of the
    /// host's commands ([`toolhost_process::Sessions::command_holding_socket`]);
    /// on a door without tokens, also a client socket of another user, or
    /// none the kernel lists.
    async fn check_peer(&self, local: SocketAddr, remote: SocketAddr) -> Option<String> {
        let host = self.host.clone();
        let anonymous = self.tokens.is_none();
        // On the one peer-check thread, not the runtime's small blocking
        // pool: there the host's own workspace reads (a start's `.git`
        // check) have deadlines, and many connections at once would hold
        // them up.
        let (tx, rx) = tokio::sync::oneshot::channel();
        let check = move || {
            let client = match toolhost_process::tcp_client(local, remote) {
                Ok(client) => client,
                Err(e) => return Some(format!("its socket cannot be looked up: {e}")),
            };
            let me = toolhost_process::current_uid();
            match client {
                Some(c) => {
                    if let Some(why) = host.sessions().command_holding_socket(c.inode) {
                        return Some(format!("it is {why}"));
                    }
                    (anonymous && c.uid != me)
                        .then(|| format!("its socket belongs to uid {}", c.uid))
                }
                None => anonymous.then(|| "the kernel lists no client socket for it".to_string()),
            }
        };
        let checked = match peer_checks().send(Box::new(move || {
            let _ = tx.send(check());
        })) {
            Ok(()) => rx.await.map_err(|e| e.to_string()),
            Err(_) => Err("the peer-check thread is gone".to_string()),
        };
        let why = checked.unwrap_or_else(|e| Some(format!("the check failed: {e}")))?;
        tracing::warn!(%remote, "refused an HTTP connection: {why}");
        Some(why)
    }

    /// `403` for every request of a connection [`Front::check_peer`] refused.
    fn refuse_peer(&self, why: &str) -> Response<Body> {
        self.metrics.response(403);
        let text = if self.tokens.is_none() {
            format!(
                "Forbidden: this server has no token, so it serves only processes of its own \
                 user on this machine, never its own commands ({why}); start it with \
                 --token-file or --tokens-file to serve others"
            )
        } else {
            format!("Forbidden: the host's own commands may not use this server ({why})")
        };
        plain(StatusCode::FORBIDDEN, &text)
    }

    /// The host name of the `Host` header, when acceptable.
    fn check_host(&self, headers: &HeaderMap) -> Result<String, Refused> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.parse::<http::uri::Authority>().ok())
            .map(|a| normalize(a.host()))
            .ok_or_else(|| {
                Box::new(plain(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: missing or invalid Host header",
                ))
            })?;
        if self.loopback && !is_loopback_name(&host) {
            tracing::warn!("refused a request whose Host is not loopback (DNS rebinding?)");
            return Err(Box::new(plain(
                StatusCode::FORBIDDEN,
                "Forbidden: Host header is not allowed",
            )));
        }
        Ok(host)
    }

    fn check_origin(&self, headers: &HeaderMap, host: &str) -> Result<(), Refused> {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return Ok(());
        };
        let allowed = origin
            .to_str()
            .ok()
            .and_then(|o| o.parse::<http::Uri>().ok())
            .filter(|u| matches!(u.scheme_str(), Some("http" | "https")))
            .and_then(|u| u.host().map(normalize))
            .is_some_and(|o| is_loopback_name(&o) || (!self.loopback && o == host));
        if allowed {
            Ok(())
        } else {
            tracing::warn!("refused a request with a foreign Origin");
            Err(Box::new(plain(
                StatusCode::FORBIDDEN,
                "Forbidden: Origin header is not allowed",
            )))
        }
    }

    /// The identity of a request: its token's ([`Tokens::admit`]), or
    /// [`ANONYMOUS_IDENTITY`] when no tokens are configured; else `401`.
    fn check_token(&self, headers: &HeaderMap) -> Result<Identity, Refused> {
        let Some(tokens) = &self.tokens else {
            return Ok(Identity::new(ANONYMOUS_IDENTITY, Scopes::DEFAULT));
        };
        let challenge = match tokens.admit(headers) {
            Ok(identity) => return Ok(identity),
            Err(AuthFailure::Missing) => "Bearer realm=\"toolhost\"",
            Err(AuthFailure::Invalid) => "Bearer realm=\"toolhost\", error=\"invalid_token\"",
        };
        tracing::warn!("refused a request without a valid bearer token");
        let mut response = plain(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: a valid `Authorization: Bearer` token is required",
        );
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(challenge),
        );
        Err(Box::new(response))
    }

    /// `GET /metrics`: every family as OpenMetrics text; `405` otherwise.
    async fn answer_metrics(&self, method: &http::Method) -> Response<Body> {
        if method != http::Method::GET {
            let mut response = json_response(
                StatusCode::METHOD_NOT_ALLOWED,
                &serde_json::json!({"error": "method not allowed", "allow": "GET"}),
            );
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET"));
            return response;
        }
        let text = self.metrics.encode().await;
        let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(metrics::CONTENT_TYPE),
        );
        response
    }

    async fn handle_checked(
        &self,
        request: Request<IncomingBody>,
        remote: SocketAddr,
    ) -> Result<Response<Body>, Refused> {
        let host = self.check_host(request.headers())?;
        self.check_origin(request.headers(), &host)?;
        if health::is_endpoint(request.uri().path()) {
            let (status, body) = health::answer(
                &self.host,
                &self.readiness,
                request.method(),
                request.uri().path(),
            )
            .await;
            let mut response = json_response(status, &body);
            if status == StatusCode::METHOD_NOT_ALLOWED {
                response
                    .headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET"));
            }
            return Ok(response);
        }
        let identity = self.check_token(request.headers())?;
        if request.uri().path() == metrics::METRICS_PATH {
            if !identity.allows(identity::Scope::Metrics) {
                return Err(Box::new(insufficient_scope(
                    &identity,
                    identity::ScopeRefusal {
                        scope: identity::Scope::Metrics,
                        what: "`GET /metrics`",
                        id: Value::Null,
                    },
                )));
            }
            return Ok(self.answer_metrics(request.method()).await);
        }
        if request.uri().path() != MCP_PATH {
            return Err(Box::new(plain(
                StatusCode::NOT_FOUND,
                "Not Found: the MCP endpoint is /mcp",
            )));
        }
        let (mut parts, body) = request.into_parts();
        // Step 4: another identity's session is no session of this request.
        let session = (parts.headers.get(SESSION_HEADER))
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        if let Some(session) = &session
            && !self.owners.owned_by(session, &identity)
        {
            tracing::warn!(
                identity = identity.name(),
                method = %parts.method,
                "a request named an MCP session this identity did not make: answered as an \
                 unknown session"
            );
            parts
                .headers
                .insert(SESSION_HEADER, HeaderValue::from_static(FOREIGN_SESSION));
        }
        let read = tokio::time::timeout(
            BODY_READ_TIMEOUT,
            Limited::new(body, MAX_MESSAGE_BYTES).collect(),
        )
        .await;
        let Ok(read) = read else {
            tracing::debug!("a request body took longer than {BODY_READ_TIMEOUT:?}");
            return Err(Box::new(plain(
                StatusCode::REQUEST_TIMEOUT,
                "Request Timeout: the body did not arrive in time",
            )));
        };
        let bytes = match read {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return Err(Box::new(json_response(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &jsonrpc::error(
                        &Value::Null,
                        codes::INVALID_REQUEST,
                        format!("Invalid Request: message longer than {MAX_MESSAGE_BYTES} bytes"),
                    ),
                )));
            }
            Err(e) => {
                tracing::debug!("reading a request body failed: {e}");
                return Err(Box::new(plain(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: unreadable body",
                )));
            }
        };
        let is_json = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.split(';')
                    .next()
                    .is_some_and(|e| e.trim().eq_ignore_ascii_case("application/json"))
            });
        let mut counted = None;
        if parts.method == http::Method::POST && is_json {
            match classify(&bytes) {
                Incoming::Message(message) => {
                    if let Err(refused) = identity::check_scopes(&identity, &message) {
                        return Err(Box::new(insufficient_scope(&identity, refused)));
                    }
                    match self.drain.admit(&message, Door::Http) {
                        Admission::Pass => {}
                        Admission::Count(c) => counted = Some(c),
                        Admission::Refuse {
                            response,
                            retry_after,
                        } => return Err(Box::new(unavailable(&response, retry_after))),
                    }
                    let session = parts
                        .headers
                        .get(SESSION_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default();
                    record_cancel(&self.cancelled, session, &message);
                }
                Incoming::Reject { code, response } => {
                    // A removed method is `404` (MCP 2026-07-28 "Streamable
                    // HTTP", "Protocol Version Header").
                    let status = match code {
                        codes::INVALID_PARAMS => StatusCode::OK,
                        codes::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
                        _ => StatusCode::BAD_REQUEST,
                    };
                    return Err(Box::new(json_response(status, &response)));
                }
                Incoming::Ignore(why) => {
                    tracing::warn!("ignoring {why}");
                    let mut accepted = Response::new(Full::new(Bytes::new()).boxed());
                    *accepted.status_mut() = StatusCode::ACCEPTED;
                    return Err(Box::new(accepted));
                }
            }
        }
        let method = parts.method.clone();
        let named = parts.headers.get(SESSION_HEADER).cloned();
        parts.extensions.insert(Authenticated {
            identity: identity.clone(),
            remote,
        });
        let response = self
            .mcp
            .handle(Request::from_parts(parts, Full::new(bytes)))
            .await;
        match (named, response.headers().get(SESSION_HEADER)) {
            // An `initialize` rmcp answered with a new session.
            (None, Some(made)) => {
                self.owners
                    .made(&String::from_utf8_lossy(made.as_bytes()), &identity)
                    .await;
            }
            (Some(named), _) if method == http::Method::DELETE && named != FOREIGN_SESSION => {
                self.owners
                    .ended(&String::from_utf8_lossy(named.as_bytes()));
            }
            _ => {}
        }
        Ok(match counted {
            Some(counted) => counted_until_sent(response, counted),
            None => response,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_loopback_needs_a_token() {
        let options = HttpOptions {
            addr: "0.0.0.0:0".parse().unwrap(),
            tokens: None,
            commands_network: None,
        };
        assert!(matches!(
            options.check(),
            Err(HttpError::TokenRequired { .. })
        ));
        let options = HttpOptions {
            addr: "[::1]:0".parse().unwrap(),
            tokens: None,
            commands_network: None,
        };
        assert!(options.check().is_ok());
        // Loopback, but commands may connect to it: a token is required.
        let options = HttpOptions {
            commands_network: Some("--allow-network".into()),
            ..options
        };
        assert!(matches!(
            options.check(),
            Err(HttpError::TokenRequiredForNetwork { .. })
        ));
    }
}
