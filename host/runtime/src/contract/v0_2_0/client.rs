//! The client channel: what a plugin asks of the MCP client behind the call
//! it serves, through `toolhost:plugin/client@0.2.0` (`wit/v0.2.0/client.wit`).
//!
//! A front door that has a client hands the call a [`CallClient`] (the MCP
//! server implements it per request); the host implementation here sits
//! between the guest and it and enforces, before anything reaches the client:
//!
//! - **grants**: `elicit` needs the manifest key `elicitation = true`,
//!   `sample` needs `sampling = true`; without them the answer is
//!   `client-error::not-granted` naming the key, and nobody is asked;
//! - **no client** (`toolhost call`, `describe`/list calls at load): progress
//!   and log messages go to the host log (tracing) only, `elicit` and `sample`
//!   answer `client-error::unsupported`;
//! - **limits**, so a hostile plugin cannot flood the client: at most
//!   [`MAX_PROGRESS_PER_CALL`] progress reports (each growing, finite;
//!   message cut to [`MAX_PROGRESS_MESSAGE_BYTES`]), [`MAX_LOGS_PER_CALL`]
//!   log messages of at most [`MAX_LOG_MESSAGE_BYTES`] each (a longer one is
//!   replaced by a note; past the count one note says the rest is dropped),
//!   [`MAX_REQUESTS_PER_CALL`] elicitations and samplings together, requests
//!   of bounded size with JSON fields that must parse, and
//!   [`MAX_RESOURCE_UPDATES_PER_CALL`] resource-updated notices for URIs the
//!   host serves from the plugin (others are ignored), each at most
//!   [`crate::plugin::MAX_URI_BYTES`], checked against the plugin's offers in
//!   at most [`MAX_URI_MATCH_STEPS_PER_CALL`] steps of template matching
//!   (`crate::uri_template`) per call, the host work a plugin can cause by
//!   them; past it the call's later notices are ignored, with one warning.
//!   Each notice yields to the other tasks before the plugin runs on.
//!
//! Like `sessions`, it works on a view of the call's store data,
//! [`ClientCtx`], projected by `CallState::client_ctx` (`plugin/store.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use wasmtime::component::HasData;

use super::server_plugin::toolhost::plugin0_2_0::client as wit;
use super::server_plugin::toolhost::plugin0_2_0::content as wit_content;
use crate::call::CallInfo;
use crate::display::escape_line;
use crate::uri_template::UriTemplate;

pub use wit::{
    ClientError, ElicitAction, ElicitRequest, ElicitResponse, LogLevel, SamplingRequest,
    SamplingResponse,
};

/// Most progress reports one call passes on (1,000); later ones are dropped.
pub const MAX_PROGRESS_PER_CALL: usize = 1000;
/// Longest progress message passed on, in bytes (4 KiB); longer ones are cut.
pub const MAX_PROGRESS_MESSAGE_BYTES: usize = 4 << 10;
/// Most log messages one call passes on (1,000); the next is replaced by one
/// note that the rest is dropped.
pub const MAX_LOGS_PER_CALL: usize = 1000;
/// Longest log message passed on (its `data` and `logger` together), in bytes
/// (64 KiB); a longer one is replaced by a note giving its size.
pub const MAX_LOG_MESSAGE_BYTES: usize = 64 << 10;
/// Most `elicit` and `sample` requests one call may make together (64); later
/// ones answer `client-error::failed`.
pub const MAX_REQUESTS_PER_CALL: usize = 64;
/// Longest elicitation (`message` plus `requested-schema`), in bytes (64 KiB).
pub const MAX_ELICIT_BYTES: usize = 64 << 10;
/// Most messages in one sampling request (1,000, as content blocks).
pub const MAX_SAMPLING_MESSAGES: usize = super::MAX_CONTENT_BLOCKS;
/// Most `resource-updated` notices one call passes on (1,000).
pub const MAX_RESOURCE_UPDATES_PER_CALL: usize = 1000;
/// Most word steps of URI template matching (`crate::uri_template`: one per
/// URI character per 64 template positions) the `resource-updated` notices
/// of one call may cost the host (4,000,000: a few milliseconds; a thousand
/// notices of 100-byte URIs against 40 short templates fit). Past it the
/// call's later notices are ignored.
pub const MAX_URI_MATCH_STEPS_PER_CALL: u64 = 4_000_000;
/// How much of a log message the host log keeps (4 KiB).
const HOST_LOG_CUT: usize = 4 << 10;

/// A boxed future, as [`CallClient`]'s methods return.
pub type ClientFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The MCP client behind one request (a tool call, a prompt, a resource
/// read), as a front door hands it to the host (`Host::call`,
/// `Host::read_resource`, `Host::get_prompt`). The host calls it only with
/// requests that passed the grants and limits above, from the task running
/// the plugin; the plugin waits for each method's future.
pub trait CallClient: Send + Sync {
    /// Sends `notifications/progress` for the request (MCP basic/utilities/
    /// progress): `progress` grows from one call to the next (the host drops
    /// reports that do not) and is finite; `total`, when given, is finite.
    /// A client without a `progressToken` for the request ignores it.
    fn progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> ClientFuture<'_, ()>;

    /// Sends `notifications/message` (MCP server/utilities/logging) at
    /// `level`, if the client's `logging/setLevel` lets it through. `logger`
    /// is the plugin's name for the source, or the plugin id when it gave
    /// none; `data` is any JSON value.
    fn log(&self, level: LogLevel, logger: String, data: serde_json::Value)
    -> ClientFuture<'_, ()>;

    /// Sends `elicitation/create` (MCP client/elicitation, form mode) and
    /// waits for the user's answer. `requested_schema` has been checked to
    /// be a JSON object.
    ///
    /// Errors: `unsupported` when the client did not declare elicitation,
    /// `failed` when it answered with an error or the request was cancelled.
    fn elicit(
        &self,
        request: ElicitRequest,
    ) -> ClientFuture<'_, Result<ElicitResponse, ClientError>>;

    /// Sends `sampling/createMessage` (MCP client/sampling) and waits for the
    /// completion. Every message is text, image or audio, and
    /// `model_preferences`, when set, is a JSON object.
    ///
    /// Errors: as [`CallClient::elicit`], for sampling.
    fn sample(
        &self,
        request: SamplingRequest,
    ) -> ClientFuture<'_, Result<SamplingResponse, ClientError>>;

    /// Sends `notifications/resources/updated` for `uri` to clients
    /// subscribed to it (MCP server/resources, subscriptions). `uri` is one
    /// the calling plugin lists or one of its templates matches.
    fn resource_updated(&self, uri: String) -> ClientFuture<'_, ()>;
}

/// The URIs a plugin may announce changes of: those it lists and those its
/// templates match, of the offers the host serves from it
/// (`client.resource-updated` for any other is ignored).
#[derive(Default)]
pub struct UriScope {
    /// Its resources' URIs.
    pub uris: std::collections::HashSet<String>,
    /// Its resource templates, parsed.
    pub templates: Vec<UriTemplate>,
    /// The longest URI it may contain, in bytes (the plugin layer's
    /// `MAX_URI_BYTES`); a longer one is not matched at all.
    pub max_uri_bytes: usize,
    /// Set once the host has merged every plugin's offers (`catalog.rs`):
    /// which of the above it serves. Merging refuses a plugin any URI or
    /// template that another plugin's offers already cover, so a URI this
    /// scope contains is one a read routes to this plugin.
    pub served: std::sync::OnceLock<ServedOffers>,
}

/// Which of a plugin's offers the host serves ([`UriScope::served`]).
#[derive(Debug, Default, Clone)]
pub struct ServedOffers {
    /// The URIs of its resources the host serves.
    pub uris: std::collections::HashSet<String>,
    /// Indexes into [`UriScope::templates`] of the templates it serves.
    pub templates: Vec<usize>,
}

impl std::fmt::Debug for UriScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UriScope")
            .field("uris", &self.uris)
            .field("templates", &self.templates.len())
            .finish_non_exhaustive()
    }
}

impl UriScope {
    /// Whether `uri` is one of the plugin's: at most
    /// [`UriScope::max_uri_bytes`] long, listed by it or matched by one of its
    /// templates, of the offers the host serves once they are merged.
    pub fn contains(&self, uri: &str) -> bool {
        let mut unbounded = u64::MAX;
        self.contains_within(uri, &mut unbounded).unwrap_or(false)
    }

    /// [`UriScope::contains`], its template matching taking steps from
    /// `budget` ([`UriTemplate::matches_within`]); `None` when the budget
    /// ran out before the answer.
    pub fn contains_within(&self, uri: &str, budget: &mut u64) -> Option<bool> {
        if uri.len() > self.max_uri_bytes {
            return Some(false);
        }
        let served = self.served.get();
        if served.map_or(self.uris.contains(uri), |s| s.uris.contains(uri)) {
            return Some(true);
        }
        let all: Vec<usize>;
        let indexes = match served {
            Some(s) => &s.templates,
            None => {
                all = (0..self.templates.len()).collect();
                &all
            }
        };
        for &i in indexes {
            if self.templates[i].matches_within(uri, budget)? {
                return Some(true);
            }
        }
        Some(false)
    }
}

/// The client side of one call's store data: the client (if any), what the
/// plugin's resource notices may name, and the counters behind the limits.
#[derive(Default)]
pub struct ClientState {
    client: Option<Arc<dyn CallClient>>,
    scope: Option<Arc<UriScope>>,
    progress_sent: usize,
    last_progress: Option<f64>,
    logs_sent: usize,
    logs_dropped: usize,
    requests: usize,
    updates_sent: usize,
    /// Steps of template matching left ([`MAX_URI_MATCH_STEPS_PER_CALL`]).
    match_steps_left: u64,
}

impl ClientState {
    /// The state for a call served for `client` (`None`: no client), whose
    /// plugin owns the URIs of `scope` (`None`: none yet, as while listing).
    pub fn new(client: Option<Arc<dyn CallClient>>, scope: Option<Arc<UriScope>>) -> Self {
        ClientState {
            client,
            scope,
            match_steps_left: MAX_URI_MATCH_STEPS_PER_CALL,
            ..ClientState::default()
        }
    }
}

/// What the `client` implementation sees of one call's store: its
/// [`ClientState`] and which call it is (the plugin id and its manifest's
/// grants).
pub struct ClientCtx<'a> {
    /// The call's client state.
    pub state: &'a mut ClientState,
    /// Which call this is.
    pub call: &'a CallInfo,
}

/// The [`HasData`] marker that lets `add_to_linker` project a store's data to
/// a [`ClientCtx`].
pub struct ClientData;

impl HasData for ClientData {
    type Data<'a> = ClientCtx<'a>;
}

impl wit_content::Host for ClientCtx<'_> {}

type WitResult<T> = wasmtime::Result<Result<T, ClientError>>;

impl ClientCtx<'_> {
    fn plugin(&self) -> &str {
        &self.call.plugin
    }

    /// Counts one `elicit`/`sample` request; `Err` past the limit.
    fn count_request(&mut self) -> Result<(), ClientError> {
        self.state.requests += 1;
        if self.state.requests > MAX_REQUESTS_PER_CALL {
            return Err(ClientError::Failed(format!(
                "this call already made {MAX_REQUESTS_PER_CALL} elicitation and sampling \
                 requests, the most one call may make (MAX_REQUESTS_PER_CALL)"
            )));
        }
        Ok(())
    }

    /// The client for a granted request: `not-granted` naming the manifest
    /// key when `granted` is false, `unsupported` without a client.
    fn granted_client(
        &self,
        granted: bool,
        key: &str,
        what: &str,
    ) -> Result<Arc<dyn CallClient>, ClientError> {
        if !granted {
            return Err(ClientError::NotGranted(format!(
                "plugin `{}` may not use {what}: its manifest does not grant it (add `{key} = \
                 true` to the manifest)",
                self.plugin()
            )));
        }
        self.state.client.clone().ok_or_else(|| {
            ClientError::Unsupported(format!(
                "no MCP client is behind this call (e.g. `toolhost call`, or the plugin is being \
                 loaded), so nobody can answer {what}"
            ))
        })
    }

    async fn send_log(&mut self, level: LogLevel, logger: String, data: serde_json::Value) {
        if let Some(client) = self.state.client.clone() {
            client.log(level, logger, data).await;
        }
    }
}

impl wit::Host for ClientCtx<'_> {
    async fn report_progress(
        &mut self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> wasmtime::Result<()> {
        let grows = progress.is_finite() && self.state.last_progress.is_none_or(|p| progress > p);
        if !grows || total.is_some_and(|t| !t.is_finite()) {
            return Ok(());
        }
        if self.state.progress_sent >= MAX_PROGRESS_PER_CALL {
            if self.state.progress_sent == MAX_PROGRESS_PER_CALL {
                tracing::warn!(
                    plugin = self.plugin(),
                    "further progress reports of this call dropped: at most \
                     {MAX_PROGRESS_PER_CALL} per call (MAX_PROGRESS_PER_CALL)"
                );
                self.state.progress_sent += 1;
            }
            return Ok(());
        }
        self.state.progress_sent += 1;
        self.state.last_progress = Some(progress);
        let message = message.map(|m| cut(m, MAX_PROGRESS_MESSAGE_BYTES));
        match self.state.client.clone() {
            Some(client) => client.progress(progress, total, message).await,
            None => tracing::info!(
                plugin = self.plugin(),
                progress,
                total,
                message = message.as_deref().map(escape_line).as_deref(),
                "progress"
            ),
        }
        Ok(())
    }

    async fn log(
        &mut self,
        level: LogLevel,
        logger: Option<String>,
        data: String,
    ) -> wasmtime::Result<()> {
        if self.state.logs_sent >= MAX_LOGS_PER_CALL {
            self.state.logs_dropped += 1;
            if self.state.logs_dropped == 1 {
                let note = format!(
                    "plugin `{}`: further log messages of this call are dropped: at most \
                     {MAX_LOGS_PER_CALL} per call (MAX_LOGS_PER_CALL)",
                    self.plugin()
                );
                tracing::warn!(plugin = self.plugin(), "{note}");
                let logger = self.plugin().to_string();
                self.send_log(LogLevel::Warning, logger, note.into()).await;
            }
            return Ok(());
        }
        self.state.logs_sent += 1;
        let size = data.len() + logger.as_ref().map_or(0, String::len);
        if size > MAX_LOG_MESSAGE_BYTES {
            let note = format!(
                "plugin `{}`: a log message of {size} bytes was dropped: at most \
                 {MAX_LOG_MESSAGE_BYTES} bytes per message (MAX_LOG_MESSAGE_BYTES)",
                self.plugin()
            );
            tracing::warn!(plugin = self.plugin(), "{note}");
            let logger = self.plugin().to_string();
            self.send_log(LogLevel::Warning, logger, note.into()).await;
            return Ok(());
        }
        let logger = logger.unwrap_or_else(|| self.plugin().to_string());
        host_log(self.plugin(), level, &logger, &data);
        let data = serde_json::from_str(&data).unwrap_or(serde_json::Value::String(data));
        self.send_log(level, logger, data).await;
        Ok(())
    }

    async fn elicit(&mut self, request: ElicitRequest) -> WitResult<ElicitResponse> {
        let granted = self.call.manifest.elicitation;
        let client = match self.granted_client(granted, "elicitation", "elicitation") {
            Ok(c) => c,
            Err(e) => return Ok(Err(e)),
        };
        if let Err(e) = self.count_request().and_then(|()| check_elicit(&request)) {
            return Ok(Err(e));
        }
        // Attributed to the plugin in a shape the host's permission questions
        // never take (`approval_text.rs`): no plugin can pose as the host.
        let mut request = request;
        request.message =
            crate::approval_text::plugin_question_text(self.plugin(), &request.message);
        Ok(client.elicit(request).await)
    }

    async fn sample(&mut self, request: SamplingRequest) -> WitResult<SamplingResponse> {
        let granted = self.call.manifest.sampling;
        let client = match self.granted_client(granted, "sampling", "sampling") {
            Ok(c) => c,
            Err(e) => return Ok(Err(e)),
        };
        if let Err(e) = self.count_request().and_then(|()| check_sampling(&request)) {
            return Ok(Err(e));
        }
        Ok(client.sample(request).await)
    }

    async fn resource_updated(&mut self, uri: String) -> wasmtime::Result<()> {
        let owned = match &self.state.scope {
            Some(scope) if self.state.updates_sent < MAX_RESOURCE_UPDATES_PER_CALL => {
                let before = self.state.match_steps_left;
                let owned = scope.contains_within(&uri, &mut self.state.match_steps_left);
                if owned.is_none() && before > 0 {
                    tracing::warn!(
                        plugin = self.plugin(),
                        "resource-updated: this call's notices took \
                         {MAX_URI_MATCH_STEPS_PER_CALL} steps of URI template matching \
                         (MAX_URI_MATCH_STEPS_PER_CALL); its later notices are ignored"
                    );
                    self.state.match_steps_left = 0;
                }
                owned == Some(true)
            }
            _ => false,
        };
        if !owned {
            tracing::debug!(
                plugin = self.plugin(),
                uri = %escape_line(&cut(uri, 256)),
                "resource-updated ignored (not the plugin's URI, or over \
                 MAX_RESOURCE_UPDATES_PER_CALL or MAX_URI_MATCH_STEPS_PER_CALL)"
            );
        } else {
            self.state.updates_sent += 1;
            if let Some(client) = self.state.client.clone() {
                client.resource_updated(uri).await;
            }
        }
        // The checks ran on this worker: let the other tasks run before the
        // plugin goes on.
        tokio::task::yield_now().await;
        Ok(())
    }
}

/// Writes a plugin's log message to the host log at the matching level,
/// escaped and cut to 4 KiB.
fn host_log(plugin: &str, level: LogLevel, logger: &str, data: &str) {
    let data = cut(data.to_string(), HOST_LOG_CUT);
    let data = escape_line(&data);
    let logger = escape_line(logger);
    match level {
        LogLevel::Debug => tracing::debug!(plugin, %logger, "{data}"),
        LogLevel::Info | LogLevel::Notice => tracing::info!(plugin, %logger, "{data}"),
        LogLevel::Warning => tracing::warn!(plugin, %logger, "{data}"),
        LogLevel::Error | LogLevel::Critical | LogLevel::Alert | LogLevel::Emergency => {
            tracing::error!(plugin, %logger, "{data}")
        }
    }
}

/// `text` cut to at most `max` bytes at a character boundary, with `…` when
/// cut.
fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let at = text.floor_char_boundary(max);
        text.truncate(at);
        text.push('…');
    }
    text
}

/// Checks an elicitation before it reaches the client: its size, and that
/// `requested-schema` is a JSON object.
fn check_elicit(request: &ElicitRequest) -> Result<(), ClientError> {
    let size = request.message.len() + request.requested_schema.len();
    if size > MAX_ELICIT_BYTES {
        return Err(ClientError::Failed(format!(
            "the elicitation is {size} bytes, more than the limit of {MAX_ELICIT_BYTES} \
             (MAX_ELICIT_BYTES)"
        )));
    }
    match serde_json::from_str::<serde_json::Value>(&request.requested_schema) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(_) => Err(ClientError::Failed(
            "requested-schema is not a JSON object".into(),
        )),
        Err(e) => Err(ClientError::Failed(format!(
            "requested-schema is not valid JSON: {e}"
        ))),
    }
}

/// Checks a sampling request before it reaches the client: message count,
/// total size, only text, image and audio content, finite temperature, and
/// `model-preferences` a JSON object when set.
fn check_sampling(request: &SamplingRequest) -> Result<(), ClientError> {
    use super::{ContentBlock, MAX_OUTPUT_BYTES};
    if request.messages.len() > MAX_SAMPLING_MESSAGES {
        return Err(ClientError::Failed(format!(
            "the sampling request has {} messages, more than the limit of \
             {MAX_SAMPLING_MESSAGES} (MAX_SAMPLING_MESSAGES)",
            request.messages.len()
        )));
    }
    let mut size = request.system_prompt.as_ref().map_or(0, String::len)
        + request.model_preferences.as_ref().map_or(0, String::len)
        + request
            .stop_sequences
            .iter()
            .map(String::len)
            .sum::<usize>();
    for (i, message) in request.messages.iter().enumerate() {
        if !matches!(
            message.content,
            ContentBlock::Text(_) | ContentBlock::Image(_) | ContentBlock::Audio(_)
        ) {
            return Err(ClientError::Failed(format!(
                "message {i} of the sampling request is not text, image or audio (MCP \
                 `SamplingMessage` content)"
            )));
        }
        size += super::block_bytes(&message.content);
    }
    if size > MAX_OUTPUT_BYTES {
        return Err(ClientError::Failed(format!(
            "the sampling request is {size} bytes, more than the limit of {MAX_OUTPUT_BYTES} \
             (MAX_OUTPUT_BYTES)"
        )));
    }
    if request.temperature.is_some_and(|t| !t.is_finite()) {
        return Err(ClientError::Failed(
            "temperature is not a finite number".into(),
        ));
    }
    if let Some(prefs) = &request.model_preferences {
        match serde_json::from_str::<serde_json::Value>(prefs) {
            Ok(serde_json::Value::Object(_)) => {}
            _ => {
                return Err(ClientError::Failed(
                    "model-preferences is not a JSON object".into(),
                ));
            }
        }
    }
    Ok(())
}
