//! `toolhost serve`: the host session's log opened or resumed, the host,
//! its control socket and the MCP door (stdio, or Streamable HTTP with
//! `--http`) started in that order, served until the client leaves or a
//! stop (a stop request, SIGTERM, SIGINT) has drained it
//! ([`toolhost::mcp::drain`], docs/operations.md#stopping-and-draining),
//! then every process session ended and the lifecycle recorded
//! (docs/event-log.md#lifecycle).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use toolhost::errln;
use toolhost::mcp::drain::{Drain, DrainReport};
use toolhost::sandbox_layers::EXIT_LAYER_MISSING;
use toolhost_runtime::{Host, HostConfig, HostEventKind, HostSessionLog, Lifecycle};

use crate::{HostArgs, RequireArgs, host_config_text, missing_layers, usage_error};

/// The `--http` options: `addr`, and the tokens read from `tokens`;
/// refused when `addr` is not loopback and there is no token.
pub(crate) fn http_options(
    addr: std::net::SocketAddr,
    tokens: Option<toolhost::mcp::identity::TokenSource>,
    commands_network: Option<String>,
) -> Result<toolhost::mcp::http::HttpOptions, toolhost::mcp::http::HttpError> {
    let tokens = tokens
        .map(toolhost::mcp::identity::Tokens::load)
        .transpose()?
        .map(Arc::new);
    let options = toolhost::mcp::http::HttpOptions {
        addr,
        tokens,
        commands_network,
    };
    options.check()?;
    Ok(options)
}

/// Runs `toolhost serve` with the host options `args`, resuming
/// `host_session` when given, over HTTP when `http` is given (else stdio),
/// refusing to start without the layers `require` names (exit 69) and
/// masking `secrets` (the token files) from every command, draining for at
/// most `drain_timeout` when stopped. Never returns on success: it exits
/// the process once the serve has ended (0 for a client that left or a
/// stop, 1 for a failure, 2 for a failed start).
pub(crate) async fn serve(
    args: HostArgs,
    host_session: Option<String>,
    http: Option<toolhost::mcp::http::HttpOptions>,
    require: RequireArgs,
    secrets: Vec<PathBuf>,
    child_nofile: Option<u64>,
    drain_timeout: std::time::Duration,
) -> ExitCode {
    let state_dir = args
        .state_dir
        .clone()
        .unwrap_or_else(HostConfig::default_state_dir);
    if let Err(e) = toolhost_process::prepare_private_dir(&state_dir) {
        return usage_error(format!(
            "cannot create state dir {}: {e}",
            state_dir.display()
        ));
    }
    // An unknown --host-session id is an error, not a new host session. Resuming
    // closes what a crashed run left open (`HostSessionLog::resume`).
    let opened = match host_session.as_deref() {
        Some(id) => HostSessionLog::resume(&state_dir, id),
        None => HostSessionLog::open(&state_dir, None),
    };
    let log = match opened {
        Ok(log) => Arc::new(log),
        Err(e) => return usage_error(e.to_string()),
    };
    let recovery = log.recovery();
    if !recovery.interrupted_calls.is_empty() || !recovery.interrupted_sessions.is_empty() {
        errln!(
            "toolhost: resumed {}: {} tool calls and {} process sessions of the previous run \
             recorded as interrupted; {} leftover processes killed",
            log.id(),
            recovery.interrupted_calls.len(),
            recovery.interrupted_sessions.len(),
            recovery.killed.len()
        );
    }
    // Disk retention: sweep on start and periodically (docs/disk.md#retention-and-gc).
    let sweep_dir = state_dir.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(toolhost_process::SWEEP_INTERVAL);
        loop {
            tick.tick().await;
            let dir = sweep_dir.clone();
            let report = tokio::task::spawn_blocking(move || {
                toolhost_process::sweep_state_dir(
                    &dir,
                    &toolhost_process::RetentionPolicy::default(),
                    std::time::SystemTime::now(),
                )
            })
            .await;
            if let Ok(r) = report {
                tracing::info!(
                    sessions_removed = r.sessions_removed.len(),
                    host_sessions_removed = r.host_sessions_removed.len(),
                    bytes_freed = r.bytes_freed,
                    "retention sweep"
                );
                for e in r.errors {
                    tracing::warn!("retention sweep: {e}");
                }
            }
        }
    });
    let pid = std::process::id();
    // Nothing is recorded as served until the host, its control socket and its
    // HTTP listener are all up: a start that fails records `failed` with the
    // reason (also on stderr), never `running` (docs/event-log.md#lifecycle).
    let failed = |what: &str, e: String| {
        log.append(HostEventKind::Lifecycle {
            state: Lifecycle::Failed,
            pid,
            message: Some(format!("{what}: {e}")),
        });
        usage_error(e)
    };
    let host = match host_config_text(args, child_nofile) {
        Ok(mut config) => {
            config.events = Some(log.clone());
            // What authenticates clients is no command's to read, also once
            // it is rotated (docs/operations.md#identities).
            let home = std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from);
            for path in secrets {
                let (masks, warning) = token_masks(
                    path,
                    &config.sessions.workspace,
                    &config.sessions.state_dir,
                    home.as_deref(),
                );
                if let Some(warning) = warning {
                    errln!("toolhost: warning: {}", toolhost_runtime::escape(&warning));
                }
                config.sessions.read_denied.extend(masks);
            }
            Host::new(config).await.map_err(|e| e.to_string())
        }
        Err(e) => Err(e),
    };
    let host = match host {
        Ok(h) => Arc::new(h),
        Err(e) => return failed("the host could not start", e),
    };
    // Before anything is served: a missing required layer is a failed start.
    if let Err(refusal) = missing_layers(require.require_sandbox.as_ref(), &host) {
        failed("the host could not start", refusal);
        host.sessions().shutdown().await;
        toolhost_process::remove_own_cgroups();
        return ExitCode::from(EXIT_LAYER_MISSING);
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let control = match toolhost::control::ControlServer::start(host.clone(), stop_tx) {
        Ok(c) => c,
        Err(e) => return failed("the control socket could not start", e.to_string()),
    };
    let http = match http {
        Some(options) => match toolhost::mcp::http::HttpServer::bind(options).await {
            Ok(server) => Some(server),
            Err(e) => return failed("the HTTP listener could not start", e.to_string()),
        },
        None => None,
    };
    let resumed = log.resumed_from();
    log.append(HostEventKind::Lifecycle {
        state: Lifecycle::Running,
        pid,
        message: Some(if resumed > 0 {
            format!("resumed host session after seq {resumed}")
        } else if http.is_some() {
            "serving MCP over HTTP".into()
        } else {
            "serving MCP on stdio".into()
        }),
    });
    errln!(
        "toolhost: host session {} (events: {})",
        log.id(),
        log.path()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );
    errln!(
        "toolhost: control socket {} (toolhost attach {})",
        control.path().display(),
        log.id()
    );
    // Put back in blocking mode right before exiting (ProcessStdio::take).
    let mut restore_blocking = None;
    let drain = Arc::new(Drain::with_timeout(drain_timeout));
    type Door = std::pin::Pin<
        Box<dyn Future<Output = Result<toolhost::mcp::ServeEnd, toolhost::mcp::ServeError>>>,
    >;
    let mut door: Door = match http {
        Some(server) => Box::pin(serve_http(host.clone(), server, drain.clone())),
        None => {
            let (stdio, restore) = toolhost::mcp::ProcessStdio::take();
            restore_blocking = Some(restore);
            Box::pin(toolhost::mcp::serve_process_stdio(
                host.clone(),
                stdio,
                drain.clone(),
            ))
        }
    };
    let mut triggers = stop_triggers(stop_rx);
    let stop = drain.run(&host, &log, &mut triggers);
    let mut stop = std::pin::pin!(stop);
    // The door ends on its own only when a stdio client leaves; else the
    // drain closes it. Background sessions end while the door closes.
    let (end, report) = tokio::select! {
        end = &mut door => {
            let report = match drain.is_draining() {
                true => Some(stop.await),
                false => None,
            };
            host.sessions().shutdown().await;
            (end, report)
        }
        report = &mut stop => {
            let (end, ()) = tokio::join!(&mut door, host.sessions().shutdown());
            (end, Some(report))
        }
    };
    // `std::process::exit` below runs no destructors: leave no cgroup behind.
    toolhost_process::remove_own_cgroups();
    let (state, message, code) = match (end, report) {
        (Err(e), _) => (Lifecycle::Failed, e.to_string(), 1),
        (Ok(_), Some(report)) => (Lifecycle::Stopped, DrainReport::message(&report), 0),
        (Ok(toolhost::mcp::ServeEnd::ClientClosed), None) => (
            Lifecycle::Stopped,
            "the MCP client closed the connection".to_string(),
            0,
        ),
        (Ok(toolhost::mcp::ServeEnd::Stopped), None) => {
            (Lifecycle::Stopped, "stop requested".to_string(), 0)
        }
    };
    log.append(HostEventKind::Lifecycle {
        state,
        pid,
        message: Some(message.clone()),
    });
    if code != 0 {
        errln!("toolhost: {message}");
    }
    if control.attached_clients() > 0 {
        // Let attached clients receive the final lifecycle event.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    drop(control);
    drop(restore_blocking);
    // stdin may be read by a blocking thread that cannot be interrupted;
    // leave without waiting for it.
    // The spans still queued go out first (docs/operations.md#traces-and-logs).
    toolhost::telemetry::shutdown();
    std::process::exit(toolhost::cli_output::finish_code(code))
}

/// Serves MCP over Streamable HTTP on `server` (bound) until `drain`
/// closes; prints the endpoint on stderr and re-reads the tokens on SIGHUP.
/// The caller then ends every process session, as for stdio.
async fn serve_http(
    host: Arc<toolhost_runtime::Host>,
    server: toolhost::mcp::http::HttpServer,
    drain: Arc<Drain>,
) -> Result<toolhost::mcp::ServeEnd, toolhost::mcp::ServeError> {
    errln!("toolhost: serving MCP over HTTP at {}", server.url());
    let tokens = server.tokens();
    let closed = drain.clone();
    server
        .serve(host, drain, async move {
            tokio::select! {
                () = closed.closed() => {}
                () = toolhost::mcp::identity::reload_on_hangup(tokens) => {}
            }
        })
        .await;
    Ok(toolhost::mcp::ServeEnd::Stopped)
}

/// What stops `serve`, one cause per stop, in order: `SIGTERM`, `SIGINT`,
/// or `a stop request` (the control socket's `stop`, which sets `control`
/// each time). SIGHUP is caught too, so it never ends the process: over
/// HTTP it re-reads the tokens (`identity::reload_on_hangup`), on stdio it
/// is ignored.
fn stop_triggers(
    mut control: tokio::sync::watch::Receiver<bool>,
) -> tokio::sync::mpsc::UnboundedReceiver<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let (Ok(mut term), Ok(mut int), Ok(_hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            tracing::warn!("cannot install the signal handlers: only a stop request stops serve");
            while control.changed().await.is_ok() {
                if tx.send("a stop request").is_err() {
                    return;
                }
            }
            return;
        };
        let mut control_open = true;
        loop {
            let cause = tokio::select! {
                Some(()) = term.recv() => "SIGTERM",
                Some(()) = int.recv() => "SIGINT",
                changed = control.changed(), if control_open => match changed {
                    Ok(()) => "a stop request",
                    Err(_) => {
                        control_open = false;
                        continue;
                    }
                },
            };
            tracing::info!(cause, "stopping");
            if tx.send(cause).is_err() {
                return;
            }
        }
    });
    rx
}

/// Directories too widely shared to hide from commands for a token file in
/// them: masking one would take away what commands commonly read.
const SHARED_DIRS: &[&str] = &[
    "/", "/tmp", "/var/tmp", "/dev/shm", "/etc", "/run", "/var", "/usr", "/home", "/root",
];

/// The denied reads that keep token file `path` (absolute, not resolved)
/// from every command: the file, and the directory that holds it, when that
/// directory is the token's own (it holds neither the workspace, nor the
/// state dir, nor the host user's `home`, and is not one of
/// [`SHARED_DIRS`]; a file in the state dir, hidden as a whole, needs no
/// more). The directory's mask matters for rotation: a file
/// renamed over `path` (how a token file is replaced atomically, and how
/// a Kubernetes Secret moves on update) is a new file that a command
/// started before the rename would see through a mask of the old one.
/// Where the directory cannot be masked, the second value is a warning that
/// says so.
fn token_masks(
    path: PathBuf,
    workspace: &std::path::Path,
    state_dir: &std::path::Path,
    home: Option<&std::path::Path>,
) -> (Vec<toolhost_process::DeniedRead>, Option<String>) {
    let deny = |path: PathBuf| toolhost_process::DeniedRead {
        path,
        origin: "host: token file".to_owned(),
    };
    let resolved = |p: &std::path::Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let dir = path.parent().map(resolved);
    let own_dir = dir.as_ref().filter(|dir| {
        !SHARED_DIRS
            .iter()
            .any(|shared| dir.as_path() == std::path::Path::new(shared))
            && ![Some(workspace), Some(state_dir), home]
                .into_iter()
                .flatten()
                .any(|inside| resolved(inside).starts_with(dir))
    });
    let in_state_dir = dir
        .as_ref()
        .is_some_and(|dir| dir.starts_with(resolved(state_dir)));
    match own_dir {
        Some(dir) => (vec![deny(path.clone()), deny(dir.clone())], None),
        // The state dir is hidden from commands as a whole (docs/sandbox.md).
        None if in_state_dir => (vec![deny(path)], None),
        None => {
            let warning = format!(
                "the token file {} is in a directory commands must still read ({}), so only \
                 the file is hidden from them: a file renamed over it while a command runs \
                 is readable by that command; keep token files in a directory of their own \
                 (docs/operations.md#identities)",
                path.display(),
                dir.map(|d| d.display().to_string()).unwrap_or_default()
            );
            (vec![deny(path)], Some(warning))
        }
    }
}
