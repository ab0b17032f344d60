//! Logs and traces (docs/operations.md#traces-and-logs): the one `tracing`
//! subscriber `main` installs, the log format of stderr (`--log-format`), and
//! the OpenTelemetry trace pipeline, off unless the standard `OTEL_*`
//! environment variables ask for it.
//!
//! - **Logs** go to stderr, filtered by `TOOLHOST_LOG` (an `EnvFilter`;
//!   default `warn,rmcp=error`), as text or, with [`LogFormat::Json`], one
//!   JSON object per line ([`LogFormat::Json`] names the fields). The lines
//!   the commands print for a person (`cli_output`'s `errln!`) take the same
//!   shape then ([`json_line`]), so every stderr line parses.
//! - **Traces** are exported over OTLP/HTTP with protobuf bodies when
//!   [`traces_setting`] says so, through a batch span processor: a span that
//!   ends is queued for the processor's own thread (the queue full, it is
//!   dropped), so no call ever waits for an export. Only spans of the
//!   host's own crates (targets `toolhost…`) reach it, never log events, so
//!   no log text becomes a span event. [`shutdown`] flushes what is queued
//!   and stops the processor; `main` and `serve` call it before exiting.
//!
//! The runtime crate emits `tracing` spans only (`plugin.call`,
//! `process.start`, `permission.decide`); the MCP door makes the SERVER
//! span of each request (`mcp/spans.rs`); this module turns them into
//! OpenTelemetry spans (`tracing-opentelemetry`).

use std::fmt::Write as _;
use std::sync::OnceLock;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::fmt::time::FormatTime as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

/// The environment variable of the log filter (an `EnvFilter` directive list).
pub const LOG_FILTER_ENV: &str = "TOOLHOST_LOG";

/// The log filter when [`LOG_FILTER_ENV`] is unset or invalid.
pub const DEFAULT_LOG_FILTER: &str = "warn,rmcp=error";

/// The name spans are exported under (the instrumentation scope) and the
/// resource's `service.name` unless `OTEL_SERVICE_NAME` or
/// `OTEL_RESOURCE_ATTRIBUTES` names another.
pub const SERVICE_NAME: &str = "toolhost";

/// How log lines are written on stderr (`--log-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// `tracing-subscriber`'s text lines (colours when stderr is a terminal).
    #[default]
    Text,
    /// One JSON object per line, `tracing-subscriber`'s JSON formatter:
    /// `timestamp` (RFC 3339, UTC, microseconds), `level` (`ERROR`, `WARN`,
    /// `INFO`, `DEBUG`, `TRACE`), `target` (the module, e.g.
    /// `toolhost_runtime::plugin::guest_log`) and `fields` (an object: the
    /// event's `message` and its other fields), nothing else (no span list,
    /// no file or line).
    Json,
}

static FORMAT: OnceLock<LogFormat> = OnceLock::new();
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// The log format [`init`] installed ([`LogFormat::Text`] before it).
pub fn log_format() -> LogFormat {
    FORMAT.get().copied().unwrap_or_default()
}

/// Whether traces are exported, from the `OTEL_*` environment (`var` reads
/// one variable; empty counts as unset). The exporter itself reads the
/// endpoint, headers, timeout and compression variables
/// (`OTEL_EXPORTER_OTLP_[TRACES_]…`), the SDK the sampler
/// (`OTEL_TRACES_SAMPLER`), the batch processor's (`OTEL_BSP_…`) and the
/// resource's (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TracesSetting {
    /// Nothing is exported: no variable asks for it, `OTEL_SDK_DISABLED` is
    /// `true`, or `OTEL_TRACES_EXPORTER` is `none`.
    Off,
    /// Exported over OTLP/HTTP with protobuf bodies.
    Otlp,
    /// The variables ask for what toolhost does not do (another exporter,
    /// another protocol): nothing is exported, and this says why (logged
    /// as a warning).
    Unsupported(String),
}

/// [`TracesSetting`] from `var`: off by default. `OTEL_SDK_DISABLED=true`
/// (any case) turns everything off; `OTEL_TRACES_EXPORTER` (a comma-separated
/// list, as the specification has it) `none` is off, `otlp` on, anything
/// else unsupported; without it traces are on exactly when
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is
/// set. The protocol (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else
/// `OTEL_EXPORTER_OTLP_PROTOCOL`) must be `http/protobuf` or unset.
pub fn traces_setting(var: impl Fn(&str) -> Option<String>) -> TracesSetting {
    let var = |name: &str| {
        var(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return TracesSetting::Off;
    }
    match var("OTEL_TRACES_EXPORTER") {
        Some(list) => {
            let exporters: Vec<String> = list
                .split(',')
                .map(|e| e.trim().to_ascii_lowercase())
                .filter(|e| !e.is_empty())
                .collect();
            if exporters.iter().any(|e| e == "none") {
                return TracesSetting::Off;
            }
            if let Some(other) = exporters.iter().find(|e| *e != "otlp") {
                return TracesSetting::Unsupported(format!(
                    "OTEL_TRACES_EXPORTER={other} is not supported (toolhost exports `otlp` \
                     only); no traces are exported"
                ));
            }
            if exporters.is_empty() {
                return TracesSetting::Off;
            }
        }
        None => {
            let endpoint = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"));
            if endpoint.is_none() {
                return TracesSetting::Off;
            }
        }
    }
    let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .map(|p| ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", p))
        .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL").map(|p| ("OTEL_EXPORTER_OTLP_PROTOCOL", p)));
    match protocol {
        Some((name, p)) if p != "http/protobuf" => TracesSetting::Unsupported(format!(
            "{name}={p} is not supported (toolhost exports OTLP over HTTP with protobuf \
             bodies, `http/protobuf`); no traces are exported"
        )),
        _ => TracesSetting::Otlp,
    }
}

/// Installs the global subscriber: the log layer in `format`, filtered by
/// [`LOG_FILTER_ENV`], and when [`traces_setting`] (of the process
/// environment) says so the OpenTelemetry layer and its exporter. Call it
/// once, first thing, outside any async runtime (the exporter's HTTP client
/// has a thread of its own). A pipeline that cannot be built (a malformed
/// endpoint) leaves traces off with a warning; the logs work regardless.
pub fn init(format: LogFormat) {
    let _ = FORMAT.set(format);
    let env = |name: &str| std::env::var(name).ok();
    let (provider, warning) = match traces_setting(env) {
        TracesSetting::Off => (None, None),
        TracesSetting::Unsupported(why) => (None, Some(why)),
        TracesSetting::Otlp => match tracer_provider(env) {
            Ok(provider) => (Some(provider), None),
            Err(e) => (
                None,
                Some(format!(
                    "OpenTelemetry traces are off: the OTLP exporter: {e}"
                )),
            ),
        },
    };
    let filter = EnvFilter::try_from_env(LOG_FILTER_ENV)
        .unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER));
    let logs = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .with_current_span(false)
            .with_span_list(false)
            .boxed(),
    }
    .with_filter(filter);
    let traces = provider.as_ref().map(|p| {
        // Only what the spans say: no source location, thread, target or
        // busy/idle time attributes, and no OpenTelemetry context entered
        // with each span (nothing here reads it).
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer(SERVICE_NAME))
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            .with_context_activation(false)
            // Spans of the host's crates at `info` and above, never events.
            // The hint keeps the `log` records of other crates (cranelift's
            // `trace` ones, by the thousand per compile) off at their source.
            .with_filter(
                tracing_subscriber::filter::filter_fn(|meta| {
                    meta.is_span()
                        && *meta.level() <= tracing::Level::INFO
                        && meta.target().starts_with("toolhost")
                })
                .with_max_level_hint(tracing::Level::INFO),
            )
    });
    tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .init();
    if let Some(provider) = provider {
        let _ = PROVIDER.set(provider);
    }
    if let Some(warning) = warning {
        tracing::warn!("{warning}");
    }
}

/// Whether spans are exported (the pipeline [`init`] built is running).
pub fn exporting() -> bool {
    PROVIDER.get().is_some()
}

/// Flushes the spans queued for export and stops the exporter (a no-op
/// when nothing is exported, or after the first call). The flush is
/// bounded by the exporter's timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`,
/// default 10 s); a failure is logged, never fatal.
pub fn shutdown() {
    static DONE: OnceLock<()> = OnceLock::new();
    if let Some(provider) = PROVIDER.get()
        && DONE.set(()).is_ok()
        && let Err(e) = provider.shutdown()
    {
        tracing::warn!("OpenTelemetry traces: the last export failed: {e}");
    }
}

/// The tracer provider: the OTLP/HTTP exporter (protobuf bodies; it reads
/// its endpoint, headers, timeout and compression from the environment)
/// behind a batch processor, and the resource: `service.name`
/// [`SERVICE_NAME`] unless the environment names one, `service.version`,
/// the SDK's own attributes and `OTEL_RESOURCE_ATTRIBUTES`.
fn tracer_provider(var: impl Fn(&str) -> Option<String>) -> anyhow::Result<SdkTracerProvider> {
    use opentelemetry_otlp::WithExportConfig as _;
    use opentelemetry_sdk::resource::{EnvResourceDetector, Resource, TelemetryResourceDetector};
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .build()?;
    let mut resource = Resource::builder_empty()
        .with_service_name(SERVICE_NAME)
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_detectors(&[
            Box::new(TelemetryResourceDetector),
            Box::new(EnvResourceDetector::new()),
        ]);
    // OTEL_SERVICE_NAME wins over OTEL_RESOURCE_ATTRIBUTES' service.name.
    if let Some(name) = var("OTEL_SERVICE_NAME").filter(|n| !n.trim().is_empty()) {
        resource = resource.with_service_name(name.trim().to_string());
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build())
}

/// `message` as one line in the shape of [`LogFormat::Json`]'s: level
/// `INFO`, target `toolhost`, the time now. What `cli_output` writes on
/// stderr instead of the text line when the format is JSON.
pub fn json_line(message: &str) -> String {
    let mut timestamp = String::new();
    let _ = tracing_subscriber::fmt::time::SystemTime.format_time(
        &mut tracing_subscriber::fmt::format::Writer::new(&mut timestamp),
    );
    let mut line = String::new();
    let _ = writeln!(
        line,
        "{{\"timestamp\":{},\"level\":\"INFO\",\"fields\":{{\"message\":{}}},\"target\":\"toolhost\"}}",
        serde_json::Value::String(timestamp),
        serde_json::Value::String(message.to_string()),
    );
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(vars: &[(&str, &str)]) -> TracesSetting {
        traces_setting(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn traces_are_off_unless_the_environment_asks() {
        use TracesSetting::*;
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        let traces_endpoint = (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://127.0.0.1:4318/v1/traces",
        );
        let cases: &[(&[(&str, &str)], TracesSetting)] = &[
            (&[], Off),
            (&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")], Off),
            (&[endpoint], Otlp),
            (&[traces_endpoint], Otlp),
            (&[("OTEL_TRACES_EXPORTER", "otlp")], Otlp),
            (&[("OTEL_TRACES_EXPORTER", "none"), endpoint], Off),
            (&[("OTEL_TRACES_EXPORTER", "otlp,none"), endpoint], Off),
            (&[("OTEL_SDK_DISABLED", "TRUE"), endpoint], Off),
            (&[("OTEL_SDK_DISABLED", "false"), endpoint], Otlp),
            (
                &[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")],
                Otlp,
            ),
            (
                &[
                    endpoint,
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                    ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
                ],
                Otlp,
            ),
        ];
        for (vars, expected) in cases {
            assert_eq!(&setting(vars), expected, "{vars:?}");
        }
        let TracesSetting::Unsupported(why) =
            setting(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")])
        else {
            panic!("grpc is not exported");
        };
        assert!(
            why.starts_with("OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported"),
            "{why}"
        );
        let TracesSetting::Unsupported(why) = setting(&[("OTEL_TRACES_EXPORTER", "zipkin")]) else {
            panic!("zipkin is not exported");
        };
        assert!(why.starts_with("OTEL_TRACES_EXPORTER=zipkin"), "{why}");
    }

    #[test]
    fn a_json_line_is_one_object_with_the_documented_fields() {
        let line = json_line("toolhost: serving \"MCP\"\nover HTTP");
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        let object = value.as_object().unwrap();
        let mut keys: Vec<_> = object.keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["fields", "level", "target", "timestamp"]);
        assert_eq!(value["level"], "INFO");
        assert_eq!(value["target"], "toolhost");
        assert_eq!(
            value["fields"],
            serde_json::json!({"message": "toolhost: serving \"MCP\"\nover HTTP"})
        );
        let ts = value["timestamp"].as_str().unwrap();
        assert!(
            ts.ends_with('Z') && ts.len() == "2026-12-04T18:40:50.123456Z".len(),
            "{ts}"
        );
    }
}
