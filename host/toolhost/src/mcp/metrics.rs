//! `GET /metrics` of `serve --http` (docs/operations.md#metrics): the host's
//! families ([`toolhost_runtime::Metrics`]) and the HTTP door's own (MCP
//! sessions, open SSE streams, responses by status) in one
//! `prometheus-client` registry, encoded in the OpenMetrics text format
//! (which Prometheus scrapes; its `text/plain` 0.0.4 format is the same
//! lines less the `# EOF` trailer and the `_created` samples).
//!
//! It needs the bearer token when one is configured ([`super::http`] checks
//! it before this module answers).

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use toolhost_runtime::Host;

/// The path: `/metrics`.
pub const METRICS_PATH: &str = "/metrics";

/// The `Content-Type` of [`HttpMetrics::encode`]'s text: OpenMetrics 1.0.0.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `code` of `toolhost_http_responses_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabel {
    code: u16,
}

/// The HTTP door's families and the registry that also holds the host's.
pub struct HttpMetrics {
    registry: Registry,
    sessions: Gauge,
    open_streams: Gauge,
    streams: Counter,
    responses: Family<CodeLabel, Counter>,
    manager: Arc<LocalSessionManager>,
}

/// One SSE stream counted open from its response to the drop of its body
/// (the stream ended or the client went away).
pub struct OpenStream(Gauge);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl HttpMetrics {
    /// The registry for `host`, whose MCP sessions live in `manager`.
    pub fn new(host: &Host, manager: Arc<LocalSessionManager>) -> HttpMetrics {
        let mut registry = Registry::default();
        host.metrics().register(&mut registry);
        let (sessions, open_streams) = (Gauge::default(), Gauge::default());
        let (streams, responses) = (Counter::default(), Family::default());
        let r = registry.sub_registry_with_prefix("toolhost_http");
        r.register(
            "sessions",
            "MCP sessions open on the Streamable HTTP door",
            sessions.clone(),
        );
        r.register(
            "open_streams",
            "SSE response streams open now (request streams and standalone GET streams)",
            open_streams.clone(),
        );
        r.register("streams", "SSE response streams opened", streams.clone());
        r.register(
            "responses",
            "HTTP responses, by status code",
            responses.clone(),
        );
        HttpMetrics {
            registry,
            sessions,
            open_streams,
            streams,
            responses,
            manager,
        }
    }

    /// Counts a response with status `code`.
    pub fn response(&self, code: u16) {
        self.responses.get_or_create(&CodeLabel { code }).inc();
    }

    /// Counts an SSE stream opened; it stays open until the guard is dropped.
    pub fn stream_opened(&self) -> OpenStream {
        self.streams.inc();
        self.open_streams.inc();
        OpenStream(self.open_streams.clone())
    }

    /// Every family as OpenMetrics text, the session count read now.
    pub async fn encode(&self) -> String {
        let sessions = self.manager.sessions.read().await.len();
        self.sessions.set(sessions as i64);
        let mut text = String::new();
        // Writing to a `String` cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
