//! The `toolhost` command line.

mod plugin_cli;
mod serve;

use std::path::PathBuf;
use std::process::ExitCode;

use std::sync::Arc;

use clap::{Parser, Subcommand};
use tokio::signal::unix::{SignalKind, signal};
use toolhost::sandbox_layers::{EXIT_LAYER_MISSING, RequiredLayers};
use toolhost::{errln, out, outln};
use toolhost_process::{SandboxMode, SandboxPolicy};
use toolhost_runtime::{Host, HostConfig, ToolCallError};
use toolhost_runtime::{escape, escape_line};

/// toolhost: a WebAssembly component host with sandboxed tool plugins.
///
/// Tools come from plugins (WASI p2 components); the built-in `bash` plugin
/// runs shell commands through the host, which owns the processes and asks
/// the policy plugin before every start.
#[derive(Parser)]
#[command(name = "toolhost", version, propagate_version = true)]
struct Cli {
    /// How log lines are written on stderr: `text`, or `json` (one object per
    /// line: timestamp, level, target, fields). Before or after the command.
    #[arg(long, global = true, value_name = "FORMAT", default_value = "text")]
    log_format: toolhost::telemetry::LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// Options every host-running command takes.
#[derive(clap::Args)]
struct HostArgs {
    /// The workspace root: commands run inside it (default: current directory).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Where output logs and the compiled-plugin cache live
    /// (default: $XDG_STATE_HOME/toolhost or ~/.local/state/toolhost).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// A policy rules file (TOML) for the policy plugin (default: its built-in rules).
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Kernel sandbox for the commands plugins start: `read-only` (nothing writable
    /// but /dev/null, the session's private TMPDIR, a private /dev/shm and private
    /// ptys), `workspace-write` (also the workspace; `.git` and the state dir stay
    /// read-only) or `full-access` (no confinement).
    #[arg(long, value_name = "MODE", default_value_t = SandboxMode::default(),
          value_parser = parse_sandbox_mode)]
    sandbox: SandboxMode,
    /// Let sandboxed commands use the network (blocked by default; full-access
    /// always allows it).
    #[arg(long)]
    allow_network: bool,
    /// Let sandboxed commands create UNIX sockets: connect to ssh-agent, a Docker
    /// daemon, D-Bus or other local services whose socket they can reach, or bind
    /// their own (blocked by default, separately from the network; full-access
    /// always allows it). A plugin's manifest must ask for it too (`unix_sockets`).
    #[arg(long)]
    allow_unix_sockets: bool,
    /// Let sandboxed commands write the workspace's `.git` (`git commit`, `git add`,
    /// hooks, config); read-only by default under workspace-write, full-access always
    /// allows it. The state dir stays read-only.
    #[arg(long)]
    allow_git_writes: bool,
    /// Most commands running at once (foreground and background together);
    /// past it a start is refused with a resource-limit error.
    #[arg(long, value_name = "N", default_value_t = toolhost_process::DEFAULT_MAX_SESSIONS as u32, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_sessions: u32,
    /// Most bytes one command's output log keeps on disk (e.g. `64MiB`, `512KiB`).
    /// Past it the log keeps its head (1 MiB, or a quarter of the cap if smaller)
    /// and its newest bytes, and records the omitted middle in the event log.
    #[arg(long, value_name = "SIZE",
          default_value_t = OutputCap(toolhost_process::DEFAULT_OUTPUT_LOG_MAX_BYTES),
          value_parser = parse_output_cap)]
    output_cap: OutputCap,
    /// What a command whose output reaches `--output-cap` gets: `keep` (it
    /// keeps running; the middle of its log is dropped) or `stop` (it is ended).
    #[arg(long, value_name = "POLICY", default_value_t = toolhost_process::OutputCapPolicy::default(),
          value_parser = parse_cap_policy)]
    output_cap_policy: toolhost_process::OutputCapPolicy,
    /// How commands' process trees are tracked: `auto` (a cgroup per command
    /// where the host can create one, else the subreaper) or `subreaper`
    /// (never create cgroups: the host adopts orphaned descendants and scans
    /// /proc; no per-command process limit).
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser = parse_process_tracking)]
    process_tracking: toolhost_process::ProcessTracking,
    /// Load a tool plugin component (repeatable). Its manifest is the `.toml`
    /// file of the same name beside it; without one it gets no grants. With
    /// `--plugin` and no `--plugins-dir`, only the named files are loaded (not
    /// the installed plugins), so a plugin being developed answers to its own
    /// tool names.
    #[arg(long = "plugin", value_name = "FILE")]
    plugins: Vec<PathBuf>,
    /// Load every `*.wasm` in DIR (each with its `.toml` manifest). Default:
    /// <state-dir>/plugins when it exists (where `toolhost plugin add` installs)
    /// and no `--plugin` is given.
    #[arg(long, value_name = "DIR")]
    plugins_dir: Option<PathBuf>,
}

/// `--require-sandbox`, on the commands that run plugins' commands.
#[derive(clap::Args)]
struct RequireArgs {
    /// Refuse to start (exit 69) unless every named sandbox layer is available:
    /// `all`, or a comma-separated list of user_namespace, mount_namespace,
    /// landlock, seccomp, cgroup_v2, network (`toolhost doctor` shows which are).
    /// Without it a missing layer only weakens the sandbox, with a warning.
    #[arg(long, value_name = "LAYERS")]
    require_sandbox: Option<RequiredLayers>,
}

impl RequireArgs {
    /// A usage error when the layers required contradict the sandbox `host`
    /// asks for (`--sandbox full-access`, `--allow-network` with `network`).
    fn conflict(&self, host: &HostArgs) -> Option<String> {
        self.require_sandbox.as_ref()?.conflict(&SandboxPolicy {
            mode: host.sandbox,
            network: host.allow_network,
            ..SandboxPolicy::default()
        })
    }
}

/// `--require-sandbox` against a started `host`: the refusal's text when a
/// required layer is missing (the caller prints it and exits 69).
fn missing_layers(required: Option<&RequiredLayers>, host: &Host) -> Result<(), String> {
    let Some(required) = required else {
        return Ok(());
    };
    required
        .check(&toolhost::sandbox_layers::of_sessions(host.sessions()))
        .map_err(|missing| missing.to_string())
}

/// A `--output-cap` in bytes, shown (as its default in `--help`) in the largest
/// unit [`toolhost_runtime::parse_size`] reads that divides it.
#[derive(Clone, Copy)]
struct OutputCap(u64);

impl std::fmt::Display for OutputCap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let units = [(30, "GiB"), (20, "MiB"), (10, "KiB")];
        match units
            .iter()
            .find(|(shift, _)| self.0 != 0 && self.0.is_multiple_of(1 << shift))
        {
            Some((shift, unit)) => write!(f, "{}{unit}", self.0 >> shift),
            None => write!(f, "{}B", self.0),
        }
    }
}

fn parse_output_cap(s: &str) -> Result<OutputCap, String> {
    let bytes = toolhost_runtime::parse_size(s).map_err(|e| e.to_string())?;
    if bytes < 4096 {
        return Err(format!("{s} is below the smallest output cap, 4KiB"));
    }
    Ok(OutputCap(bytes))
}

fn parse_cap_policy(s: &str) -> Result<toolhost_process::OutputCapPolicy, String> {
    match s {
        "keep" => Ok(toolhost_process::OutputCapPolicy::Keep),
        "stop" => Ok(toolhost_process::OutputCapPolicy::Stop),
        _ => Err(format!("unknown output cap policy `{s}`: use keep or stop")),
    }
}

fn parse_process_tracking(s: &str) -> Result<toolhost_process::ProcessTracking, String> {
    match s {
        "auto" => Ok(toolhost_process::ProcessTracking::Auto),
        "subreaper" => Ok(toolhost_process::ProcessTracking::Subreaper),
        _ => Err(format!(
            "unknown process tracking `{s}`: use auto or subreaper"
        )),
    }
}

fn parse_sandbox_mode(s: &str) -> Result<SandboxMode, String> {
    s.parse()
        .map_err(|e: toolhost_process::SandboxError| e.to_string())
}

/// Where host sessions live.
#[derive(clap::Args)]
struct StateArgs {
    /// The state dir `toolhost serve` uses (default: $XDG_STATE_HOME/toolhost
    /// or ~/.local/state/toolhost).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

impl StateArgs {
    fn dir(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(HostConfig::default_state_dir)
    }
}

#[derive(Subcommand)]
enum Command {
    /// Call one tool once and print its result.
    ///
    /// Prints the tool's text on stdout (text blocks as they are; images,
    /// audio and resources as one-line markers such as `[image image/png, 68
    /// bytes]`). Exits 0 when the tool succeeded, 1 when
    /// the tool reports an error (e.g. a non-zero exit code), 2 for usage
    /// errors (unknown tool, invalid arguments, bad configuration). On SIGTERM,
    /// SIGINT or SIGHUP it ends the call's commands, prints nothing more and
    /// exits 128 + the signal (143, 130, 129). What the call leaves running
    /// (background tasks) ends when it exits.
    ///
    /// Example: toolhost call bash '{"command":"echo hello"}'
    Call {
        /// The tool name, e.g. `bash`.
        tool: String,
        /// The arguments as a JSON object, e.g. '{"command":"ls"}'.
        #[arg(default_value = "{}")]
        arguments: String,
        /// Print the whole result as JSON ({"text", "structured", "is_error"},
        /// and "content", MCP content blocks, when the result is more than
        /// one text block).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        host: HostArgs,
        #[command(flatten)]
        require: RequireArgs,
    },
    /// Serve MCP over stdio or Streamable HTTP (for agents), plus the control
    /// socket (for humans).
    ///
    /// On stdio, stdout carries MCP messages only; logs go to stderr. With
    /// --http ADDR, MCP is served at http://ADDR/mcp instead (many concurrent
    /// sessions) and the bound address is printed on stderr. Every tool call,
    /// process and permission request is recorded in the host session's event
    /// log (<state-dir>/hosts/<id>/events.jsonl); `toolhost attach` follows it
    /// through the control socket. The host session id is printed on stderr.
    ///
    /// Register with an MCP client as the command `toolhost serve --workspace DIR`,
    /// or, with --http, as the URL http://ADDR/mcp.
    Serve {
        /// Resume this host session (e.g. hs_0190a1b2c3d4): its event log
        /// continues where it stopped. Default: a new host session.
        #[arg(long, value_name = "ID")]
        host_session: Option<String>,
        /// Serve MCP over Streamable HTTP on ADDR (e.g. 127.0.0.1:8765; port 0
        /// picks a free one) at the path /mcp, instead of stdio. A non-loopback
        /// address needs --token-file.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// With --http: every request must carry `Authorization: Bearer TOKEN`,
        /// TOKEN being this file's content (surrounding whitespace removed), the
        /// identity `default`. Others must not read it, nor the group write it (e.g. mode 0600).
        #[arg(
            long,
            value_name = "PATH",
            requires = "http",
            conflicts_with = "tokens_file"
        )]
        token_file: Option<PathBuf>,
        /// With --http: named tokens, a TOML file of [[token]] tables (name, then
        /// token = "..." or sha256 = "<hex>", optional scopes from call, answer,
        /// metrics, admin). Mode as --token-file. SIGHUP re-reads it (and
        /// --token-file) without ending sessions or jobs.
        #[arg(long, value_name = "PATH", requires = "http")]
        tokens_file: Option<PathBuf>,
        /// On SIGTERM, SIGINT or a stop request: how long calls in progress
        /// may run on while new ones are refused (`0`, `500ms`, `20s`, `2m`);
        /// then they are cancelled. serve exits at most 10 s after it: give
        /// a supervisor at least this plus 10 s.
        #[arg(long, value_name = "DURATION", default_value = "20s",
              value_parser = toolhost::mcp::drain::parse_timeout)]
        drain_timeout: std::time::Duration,
        #[command(flatten)]
        host: HostArgs,
        #[command(flatten)]
        require: RequireArgs,
    },
    /// Follow a running host session's events; answer permission prompts,
    /// cancel or background calls, detach and re-attach.
    ///
    /// Prints every event after the saved cursor (or --from), then follows
    /// live. Reads commands from stdin, one per line: a / A / r / R answer
    /// the pending permission prompt (allow once / always, reject once /
    /// always); `cancel [CALL]`, `bg [CALL]` (detach a running call to the
    /// background), `kill SESSION`, `ls`, `q` (detach, after queued actions
    /// are answered), `Q` (detach at once), `stop` (stop the host). End of
    /// input detaches. Exits 0 on detach or host stop, 3 when the connection
    /// is lost.
    Attach {
        /// The host session (hs_...). Default: the only running one.
        session: Option<String>,
        /// Start after this seq (0: the whole history) instead of the saved cursor.
        #[arg(long, value_name = "SEQ")]
        from: Option<u64>,
        /// Print the events up to now and detach.
        #[arg(long)]
        once: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// List host sessions (one per `toolhost serve` run, running or not) and
    /// the tool calls and process sessions of running ones.
    HostSessions {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// List the tools of the loaded plugins.
    Tools {
        /// Print JSON (name, description, input schema) instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        host: HostArgs,
    },
    /// Remove what the retention policy does not keep from the state dir.
    ///
    /// Removes the private temp dirs of finished sessions, finished sessions
    /// (`<state-dir>/sessions/<id>`) older than --max-age or, oldest first,
    /// beyond --max-bytes together, and stopped host sessions
    /// (`<state-dir>/hosts/<id>`) older than --host-max-age or beyond
    /// --host-max-bytes. Running sessions and host sessions (their logs are
    /// locked) are never removed. `toolhost serve` does the same on start and
    /// every 10 minutes with the defaults.
    Gc {
        /// Finished sessions older than this many seconds are removed (default: 24 h).
        #[arg(long, value_name = "SECS", default_value_t = toolhost_process::FINISHED_SESSION_MAX_AGE.as_secs())]
        max_age: u64,
        /// Most bytes finished sessions keep together (default: 1 GiB).
        #[arg(long, value_name = "BYTES", default_value_t = toolhost_process::FINISHED_SESSIONS_MAX_BYTES)]
        max_bytes: u64,
        /// Stopped host sessions older than this many seconds are removed (default: 7 days).
        #[arg(long, value_name = "SECS", default_value_t = toolhost_process::HOST_SESSION_MAX_AGE.as_secs())]
        host_max_age: u64,
        /// Most bytes stopped host sessions keep together (default: 256 MiB).
        #[arg(long, value_name = "BYTES", default_value_t = toolhost_process::HOST_SESSIONS_MAX_BYTES)]
        host_max_bytes: u64,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Check whether this machine (or container) runs toolhost as configured.
    ///
    /// Starts the host as `serve` would with the same options and reports each
    /// sandbox layer (user_namespace, mount_namespace, landlock, seccomp,
    /// cgroup_v2, network) as available or not, with the reason and what it
    /// needs from the machine or the container runtime; the sandbox commands
    /// would run under; whether the state dir is writable; the contract and MCP
    /// versions; whether every plugin loads. Serves nothing and records no host
    /// session. Exits 0 when everything is available, 1 when something is
    /// missing, 2 for usage errors.
    Doctor {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        host: HostArgs,
    },
    /// Work with plugin components: inspect, add (install, compiled ahead),
    /// new (a project from the examples), wit (the contract).
    Plugin {
        #[command(subcommand)]
        command: plugin_cli::PluginCommand,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Logs, and traces when the OTEL_* variables ask (docs/operations.md#traces-and-logs).
    toolhost::telemetry::init(cli.log_format);
    // Commands get the limit the host was started with back (see
    // `SessionsConfig::child_nofile`): some programs loop up to it.
    let child_nofile = match toolhost_process::raise_fd_limit() {
        Ok(limit) => Some(limit.inherited),
        Err(e) => {
            tracing::warn!("cannot raise the open-file limit: {e}");
            None
        }
    };
    let runtime = match toolhost_runtime::tokio_runtime() {
        Ok(rt) => rt,
        Err(e) => {
            errln!("toolhost: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let code = runtime.block_on(run(cli, child_nofile));
    toolhost::telemetry::shutdown();
    toolhost::cli_output::finish(code)
}

/// Runs one command. `child_nofile`: the soft open-file limit commands start with
/// (the one `toolhost` was started with; see `SessionsConfig::child_nofile`).
async fn run(cli: Cli, child_nofile: Option<u64>) -> ExitCode {
    match cli.command {
        Command::Call {
            tool,
            arguments,
            json,
            host,
            require,
        } => {
            if let Some(conflict) = require.conflict(&host) {
                return usage_error(conflict);
            }
            let arguments: serde_json::Value = match serde_json::from_str(&arguments) {
                Ok(v) => v,
                Err(e) => return usage_error(format!("ARGUMENTS is not valid JSON: {e}")),
            };
            let host = match host_config(host, child_nofile) {
                Ok(mut config) => {
                    config.engine.max_instances = ONE_CALL_INSTANCES;
                    start_host(config).await
                }
                Err(code) => Err(code),
            };
            let host = match host {
                Ok(h) => h,
                Err(code) => return code,
            };
            if let Err(refusal) = missing_layers(require.require_sandbox.as_ref(), &host) {
                errln!("toolhost: {}", escape(&refusal));
                host.sessions().shutdown().await;
                return ExitCode::from(EXIT_LAYER_MISSING);
            }
            // A person at the terminal answers the policy's asks (`tty::TtyApprover`,
            // the last approver `Permissions::check_start` asks).
            if let Some(tty) = toolhost::tty::TtyApprover::if_interactive() {
                host.permissions().add_approver(Arc::new(tty));
            }
            // SIGTERM, SIGINT or SIGHUP while the call runs: kill the
            // process groups it started (they would otherwise outlive us,
            // with nobody left to enforce their timeout), then exit 128+n.
            let outcome = tokio::select! {
                outcome = host.call_tool(&tool, arguments) => outcome,
                signal = termination_signal(true) => {
                    host.sessions().shutdown().await;
                    return ExitCode::from(128 + signal);
                }
            };
            let code = match outcome {
                Ok(result) => {
                    if json {
                        let mut value = serde_json::json!({
                            "text": result.text(),
                            "structured": result.structured,
                            "is_error": result.is_error,
                        });
                        // Anything beyond one text block (contract 0.2.0):
                        // every block as MCP content (binary data base64).
                        if !matches!(
                            result.content.as_slice(),
                            [toolhost_runtime::ContentBlock::Text(_)]
                        ) {
                            value["content"] = result
                                .content
                                .iter()
                                .map(|b| {
                                    serde_json::to_value(toolhost::content::content_block(b))
                                        .unwrap_or_default()
                                })
                                .collect();
                        }
                        outln!("{value}");
                    } else {
                        // Plugin text, for a terminal: controls escaped (`--json` is exact).
                        // Text blocks as they are, other blocks as one-line markers.
                        let rendered = result.render_terminal();
                        let text = escape(&rendered);
                        out!("{text}");
                        if !text.ends_with('\n') {
                            outln!();
                        }
                    }
                    if result.is_error {
                        ExitCode::from(1)
                    } else {
                        ExitCode::SUCCESS
                    }
                }
                Err(
                    e
                    @ (ToolCallError::UnknownTool { .. } | ToolCallError::InvalidArguments { .. }),
                ) => usage_error(e.to_string()),
                Err(e @ (ToolCallError::Plugin(_) | ToolCallError::Cancelled(_))) => {
                    let reason = e.to_string();
                    if json {
                        // The same result an MCP client gets (`is_error`, the
                        // reason as its text), and which failure it was.
                        outln!(
                            "{}",
                            serde_json::json!({
                                "text": reason,
                                "structured": null,
                                "is_error": true,
                                "failure": {"kind": failure_kind(&e), "reason": reason},
                            })
                        );
                    }
                    errln!("toolhost: {}", escape(&reason));
                    ExitCode::from(1)
                }
            };
            // The result is out; what the call left running (background
            // sessions, detached runs) ends with this process, as README says.
            host.sessions().shutdown().await;
            code
        }
        Command::Serve {
            host_session,
            http,
            token_file,
            tokens_file,
            drain_timeout,
            host,
            require,
        } => {
            if let Some(conflict) = require.conflict(&host) {
                return usage_error(conflict);
            }
            // Checked before anything starts, so a refused bind costs nothing.
            // Commands that can reach the network could reach this server too.
            let commands_network = if host.sandbox == SandboxMode::FullAccess {
                Some("--sandbox full-access".to_string())
            } else if host.allow_network {
                Some("--allow-network".to_string())
            } else {
                None
            };
            use toolhost::mcp::identity::TokenSource;
            // Absolute but not resolved: each start masks what the path names
            // then (a Kubernetes Secret's file is a symlink that moves on update).
            let token_path = token_file.as_deref().or(tokens_file.as_deref());
            let secrets = match token_path.map(std::path::absolute).transpose() {
                Ok(path) => path.into_iter().collect(),
                Err(e) => return usage_error(format!("cannot resolve the token file: {e}")),
            };
            let tokens = token_file
                .map(TokenSource::Single)
                .or(tokens_file.map(TokenSource::Named));
            let http = match http
                .map(|addr| serve::http_options(addr, tokens, commands_network))
                .transpose()
            {
                Ok(h) => h,
                Err(e) => return usage_error(e.to_string()),
            };
            serve::serve(
                host,
                host_session,
                http,
                require,
                secrets,
                child_nofile,
                drain_timeout,
            )
            .await
        }
        Command::Attach {
            session,
            from,
            once,
            state,
        } => attach(state.dir(), session, from, once).await,
        Command::HostSessions { json, state } => host_sessions(state.dir(), json).await,
        Command::Tools { json, host } => {
            let host = match host_config(host, child_nofile) {
                Ok(config) => start_host(config).await,
                Err(code) => Err(code),
            };
            let host = match host {
                Ok(h) => h,
                Err(code) => return code,
            };
            // The shell the built-in bash tool picks (the plugin makes the same
            // choice through `sessions.start`).
            let bash_shell = host.sessions().shell().path.clone();
            if json {
                let tools: Vec<_> = host
                    .tools()
                    .iter()
                    .map(|t| {
                        let mut tool = serde_json::json!({
                            "name": t.name,
                            "description": t.spec.description,
                            "inputSchema": serde_json::from_str::<serde_json::Value>(&t.spec.input_schema).ok(),
                            "plugin": t.plugin.id(),
                        });
                        if t.plugin.id() == toolhost_runtime::BASH_ID {
                            tool["shell"] = bash_shell.display().to_string().into();
                        }
                        tool
                    })
                    .collect();
                outln!("{}", serde_json::Value::Array(tools));
            } else {
                // Name, owning plugin, first line of the description: a prefixed
                // `id__tool` is always plugin `id`'s, and the column says so.
                for t in host.tools() {
                    let summary = t.spec.description.lines().next().unwrap_or_default();
                    outln!(
                        "{:<16} {:<12} {}",
                        escape_line(&t.name),
                        format!("[{}]", t.plugin.id()),
                        escape_line(summary)
                    );
                }
                if !host.refused_tools().is_empty() {
                    outln!();
                    outln!("refused tools (not offered):");
                    for r in host.refused_tools() {
                        outln!(
                            "  {}/{}: {}",
                            r.plugin,
                            escape_line(&r.name),
                            escape_line(&r.reason)
                        );
                    }
                }
                if !host.skipped_plugins().is_empty() {
                    outln!();
                    outln!("skipped plugins (not loaded):");
                    for p in host.skipped_plugins() {
                        outln!(
                            "  {}: {}",
                            escape_line(&p.file.display().to_string()),
                            escape_line(&p.error)
                        );
                    }
                }
                outln!();
                outln!("commands run under: {}", host.sessions().sandbox());
                outln!("process tracking: {}", host.sessions().tracking());
                outln!("the bash tool's shell: {}", bash_shell.display());
            }
            ExitCode::SUCCESS
        }
        Command::Doctor { json, host } => match host_config(host, child_nofile) {
            Ok(config) => toolhost::doctor::run(config, json).await,
            Err(code) => code,
        },
        Command::Plugin { command } => plugin_cli::run(command).await,
        Command::Gc {
            max_age,
            max_bytes,
            host_max_age,
            host_max_bytes,
            json,
            state,
        } => gc(
            state.dir(),
            toolhost_process::RetentionPolicy {
                finished_max_age: std::time::Duration::from_secs(max_age),
                finished_max_bytes: max_bytes,
                host_max_age: std::time::Duration::from_secs(host_max_age),
                host_max_bytes,
            },
            json,
        ),
    }
}

/// `toolhost gc`: one retention sweep of `state_dir`, reported on stdout.
fn gc(state_dir: PathBuf, policy: toolhost_process::RetentionPolicy, json: bool) -> ExitCode {
    let report =
        toolhost_process::sweep_state_dir(&state_dir, &policy, std::time::SystemTime::now());
    if json {
        match serde_json::to_string(&report) {
            Ok(text) => outln!("{text}"),
            Err(e) => errln!("toolhost: {e}"),
        };
    } else {
        outln!(
            "removed {} finished sessions and {} temp dirs, kept {} ({} running); removed {} \
             host sessions ({} running); freed {} bytes",
            report.sessions_removed.len(),
            report.tmp_dirs_removed,
            report.sessions_kept,
            report.sessions_running,
            report.host_sessions_removed.len(),
            report.host_sessions_running,
            report.bytes_freed
        );
    }
    for e in &report.errors {
        errln!("toolhost gc: {}", escape_line(&e.to_string()));
    }
    if report.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The host session to attach to: the given one, else the only running one.
async fn pick_session(
    state_dir: &std::path::Path,
    session: Option<String>,
) -> Result<String, ExitCode> {
    if let Some(s) = session {
        return Ok(s);
    }
    let live: Vec<_> = toolhost::control::list_host_sessions(state_dir)
        .await
        .into_iter()
        .filter(|h| h.live)
        .collect();
    match live.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(usage_error(format!(
            "no running host session in {}; start one with `toolhost serve`",
            state_dir.display()
        ))),
        many => Err(usage_error(format!(
            "several host sessions are running; name one: {}",
            many.iter()
                .map(|h| h.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

async fn attach(
    state_dir: PathBuf,
    session: Option<String>,
    from: Option<u64>,
    once: bool,
) -> ExitCode {
    use toolhost::attach::{AttachEnd, AttachOptions, cursor_file, run_attach};
    let session = match pick_session(&state_dir, session).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let options = AttachOptions {
        socket: toolhost::control::socket_path(&state_dir, &session),
        cursor_file: Some(cursor_file(&state_dir, &session)),
        from,
        once,
    };
    let input = tokio::io::BufReader::new(tokio::io::stdin());
    let end = run_attach(options, input, tokio::io::stdout()).await;
    // stdin is read by a blocking thread; leave without waiting for it.
    let code = match end {
        Ok(AttachEnd::Detached | AttachEnd::HostStopped) => 0,
        Ok(AttachEnd::ConnectionLost) => 3,
        // Reported by `finish_code` (exit 74).
        Ok(AttachEnd::OutputClosed(e)) => {
            toolhost::cli_output::record(toolhost::cli_output::Stream::Stdout, &e);
            0
        }
        Err(e) => {
            errln!("toolhost: cannot attach to {session}: {e}");
            2
        }
    };
    std::process::exit(toolhost::cli_output::finish_code(code))
}

async fn host_sessions(state_dir: PathBuf, json: bool) -> ExitCode {
    use toolhost::control::{ControlClient, list_host_sessions, socket_path};
    let hosts = list_host_sessions(&state_dir).await;
    let mut all = Vec::new();
    for h in &hosts {
        let mut detail = serde_json::json!(null);
        if h.live
            && let Ok(mut client) = ControlClient::connect(&socket_path(&state_dir, &h.id)).await
            && let Ok(list) = client.call("sessions.list", serde_json::json!({})).await
        {
            detail = list;
        }
        all.push((h, detail));
    }
    if json {
        let value: Vec<_> = all
            .iter()
            .map(|(h, d)| {
                serde_json::json!({
                    "host_session": h,
                    "calls": d.get("calls"),
                    "processes": d.get("processes"),
                })
            })
            .collect();
        outln!("{}", serde_json::Value::Array(value));
        return ExitCode::SUCCESS;
    }
    if all.is_empty() {
        outln!("no host sessions in {}", state_dir.display());
    }
    for (h, d) in &all {
        outln!(
            "{}  {}  pid {}  last seq {}",
            escape_line(&h.id),
            escape_line(&h.state.to_string()),
            h.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            h.last_seq
        );
        for c in d
            .get("calls")
            .and_then(|c| c.as_array())
            .into_iter()
            .flatten()
        {
            // Every field may carry plugin or agent text: controls escaped.
            let field = |key: &str| escape_line(c[key].as_str().unwrap_or("?")).into_owned();
            outln!(
                "  call    {}  {}  running (via {})",
                field("tool_call_id"),
                field("tool"),
                field("source")
            );
        }
        for p in d
            .get("processes")
            .and_then(|c| c.as_array())
            .into_iter()
            .flatten()
        {
            let field =
                |key: &str, none: &str| escape_line(p[key].as_str().unwrap_or(none)).into_owned();
            outln!(
                "  process {}  {:<8}  {}{}  {}",
                field("id", "?"),
                field("status", "?"),
                field("tool_call_id", "background"),
                if p["detached"] == serde_json::json!(true) {
                    " (detached)"
                } else {
                    ""
                },
                field("command", "")
            );
        }
    }
    ExitCode::SUCCESS
}

/// What `call --json` names a failed call (`failure.kind`): `limit`, `trap`,
/// `output_too_large`, `too_many_blocks`, `host` (the host could not run it)
/// or `cancelled` (docs/cli.md).
fn failure_kind(e: &ToolCallError) -> &'static str {
    use toolhost_runtime::CallError;
    match e {
        ToolCallError::Plugin(CallError::Limit { .. }) => "limit",
        ToolCallError::Plugin(CallError::Trap { .. }) => "trap",
        ToolCallError::Plugin(CallError::OutputTooLarge { .. }) => "output_too_large",
        ToolCallError::Plugin(CallError::TooManyBlocks { .. }) => "too_many_blocks",
        ToolCallError::Plugin(CallError::Host { .. }) => "host",
        ToolCallError::Cancelled(_) => "cancelled",
        ToolCallError::UnknownTool { .. } | ToolCallError::InvalidArguments { .. } => "usage",
    }
}

/// Pool slots for `toolhost call`: one tool call with its policy call (and a few
/// spare); a smaller pool is quicker to set up and tear down (benchmark P6).
const ONE_CALL_INSTANCES: u32 = 8;

/// The host configuration `args` ask for: each option sets its one field (most
/// of them in [`HostConfig::sessions`]), every other field keeps the default
/// [`HostConfig::new`] documents. `child_nofile`: the soft open-file limit
/// commands start with. Errors (a usage error, exit code 2): no current
/// directory, an unreadable `--policy` file.
fn host_config(args: HostArgs, child_nofile: Option<u64>) -> Result<HostConfig, ExitCode> {
    host_config_text(args, child_nofile).map_err(usage_error)
}

/// [`host_config`], its error the text `usage_error` would print.
fn host_config_text(args: HostArgs, child_nofile: Option<u64>) -> Result<HostConfig, String> {
    let workspace = match args.workspace {
        Some(w) => w,
        None => std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?,
    };
    let policy_rules = match &args.policy {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read policy file {}: {e}", path.display()))?,
        None => String::new(),
    };
    let state_dir = args.state_dir.unwrap_or_else(HostConfig::default_state_dir);
    // Without --plugins-dir and --plugin, the plugins `toolhost plugin add`
    // installed. Explicit `--plugin` files alone mean exactly those plugins: a
    // plugin under development must not be renamed (`id__tool`) or shadowed by
    // an installed copy of itself.
    let plugins_dir = args.plugins_dir.or_else(|| {
        let installed = plugin_cli::default_plugins_dir(&state_dir);
        (args.plugins.is_empty() && installed.is_dir()).then_some(installed)
    });
    let mut config = HostConfig::new(workspace, state_dir);
    config.policy_rules = policy_rules;
    config.plugins = args.plugins;
    config.plugins_dir = plugins_dir;
    let sessions = &mut config.sessions;
    sessions.sandbox = SandboxPolicy {
        mode: args.sandbox,
        network: args.allow_network,
        unix_sockets: args.allow_unix_sockets,
        git_writable: args.allow_git_writes,
    };
    sessions.max_sessions = args.max_sessions as usize;
    sessions.child_nofile = child_nofile;
    sessions.output_log_max_bytes = args.output_cap.0;
    sessions.output_cap_policy = args.output_cap_policy;
    sessions.process_tracking = args.process_tracking;
    // The built-in deny list beneath the host user's home and the system's
    // secrets (docs/sandbox.md#denied-reads); `serve` adds its token file.
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    sessions.read_denied = toolhost_process::default_read_denied(home.as_deref());
    // A plugin's first compile (15-20 s for Python or JS) is said on stderr,
    // not sat through in silence.
    config.compile_progress = Some(toolhost_runtime::CompileProgress(Arc::new(
        |plugin: &str, took: Option<std::time::Duration>| match took {
            None => {
                errln!(
                    "toolhost: compiling plugin `{}` for this machine (its first use; Python \
                     and JS plugins take 15-20 s; later starts load it from the cache)...",
                    escape(plugin)
                );
            }
            Some(took) => {
                errln!(
                    "toolhost: compiled plugin `{}` in {:.1} s",
                    escape(plugin),
                    took.as_secs_f64()
                );
            }
        },
    )));
    Ok(config)
}

/// [`Host::new`]; its error is a usage error (exit code 2).
async fn start_host(config: HostConfig) -> Result<Host, ExitCode> {
    Host::new(config)
        .await
        .map_err(|e| usage_error(e.to_string()))
}

/// Prints `message` (escaped: it can hold plugin text) on stderr; exit code 2.
fn usage_error(message: String) -> ExitCode {
    errln!("toolhost: {}", escape(&message));
    ExitCode::from(2)
}

/// Resolves with the signal number when the process gets SIGTERM, SIGINT or,
/// when `hangup` (the one-shot `call`), SIGHUP (never, if the handlers cannot
/// be installed). `serve` has its own (`serve.rs`, `stop_triggers`): a
/// signal there begins a drain, and SIGHUP never stops it.
async fn termination_signal(hangup: bool) -> u8 {
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => 15,
        _ = int.recv() => 2,
        Some(()) = hup.recv(), if hangup => 1,
    }
}
