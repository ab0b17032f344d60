//! The `toolhost` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use toolhost::sandbox::{SandboxMode, SandboxPolicy};
use toolhost::{Host, HostConfig};

/// toolhost: a WebAssembly component host with sandboxed tool plugins.
///
/// Tools come from plugins (WASI p2 components); the built-in `bash` plugin
/// runs shell commands through the host, which owns the processes and asks
/// the policy plugin before every start.
#[derive(Parser)]
#[command(name = "toolhost", version, propagate_version = true)]
struct Cli {
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
    /// but /dev/null), `workspace-write` (the workspace and a private temp dir;
    /// `.git` and the state dir stay read-only) or `full-access` (no confinement).
    #[arg(long, value_name = "MODE", default_value = "workspace-write",
          value_parser = parse_sandbox_mode)]
    sandbox: SandboxMode,
    /// Let sandboxed commands use the network (blocked by default; full-access
    /// always allows it).
    #[arg(long)]
    allow_network: bool,
    /// Load a tool plugin component (repeatable). Its manifest is the `.toml`
    /// file of the same name beside it; without one it gets no grants.
    #[arg(long = "plugin", value_name = "FILE")]
    plugins: Vec<PathBuf>,
    /// Load every `*.wasm` in DIR (each with its `.toml` manifest).
    #[arg(long, value_name = "DIR")]
    plugins_dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum PluginCommand {
    /// Show a component's imports and exports, its tools (from `describe`),
    /// its manifest and what it is granted.
    Inspect {
        /// The component file (`name.wasm`; the manifest is `name.toml` beside it).
        file: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn parse_sandbox_mode(s: &str) -> Result<SandboxMode, String> {
    s.parse()
        .map_err(|e: toolhost::sandbox::SandboxError| e.to_string())
}

#[derive(Subcommand)]
enum Command {
    /// Call one tool once and print its result.
    ///
    /// Prints the tool's text on stdout. Exits 0 when the tool succeeded, 1 when
    /// the tool reports an error (e.g. a non-zero exit code), 2 for usage
    /// errors (unknown tool, invalid arguments, bad configuration).
    ///
    /// Example: toolhost call bash '{"command":"echo hello"}'
    Call {
        /// The tool name, e.g. `bash`.
        tool: String,
        /// The arguments as a JSON object, e.g. '{"command":"ls"}'.
        #[arg(default_value = "{}")]
        arguments: String,
        /// Print the whole result as JSON ({"text", "structured", "is_error"}).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        host: HostArgs,
    },
    /// List the tools of the loaded plugins.
    Tools {
        /// Print JSON (name, description, input schema) instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        host: HostArgs,
    },
    /// Work with plugin components.
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TOOLHOST_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("toolhost: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(run(cli))
}

async fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Call {
            tool,
            arguments,
            json,
            host,
        } => {
            let arguments: serde_json::Value = match serde_json::from_str(&arguments) {
                Ok(v) => v,
                Err(e) => return usage_error(format!("ARGUMENTS is not valid JSON: {e}")),
            };
            let host = match start_host(host).await {
                Ok(h) => h,
                Err(code) => return code,
            };
            match host.call_tool(&tool, &arguments).await {
                Ok(result) => {
                    if json {
                        let value = serde_json::json!({
                            "text": result.text,
                            "structured": result.structured,
                            "is_error": result.is_error,
                        });
                        println!("{value}");
                    } else {
                        print!("{}", result.text);
                        if !result.text.ends_with('\n') {
                            println!();
                        }
                    }
                    if result.is_error {
                        ExitCode::from(1)
                    } else {
                        ExitCode::SUCCESS
                    }
                }
                Err(
                    e @ (toolhost::HostError::UnknownTool { .. }
                    | toolhost::HostError::InvalidArguments { .. }),
                ) => usage_error(e.to_string()),
                Err(e) => {
                    eprintln!("toolhost: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Tools { json, host } => {
            let host = match start_host(host).await {
                Ok(h) => h,
                Err(code) => return code,
            };
            if json {
                let tools: Vec<_> = host
                    .tools()
                    .iter()
                    .map(|t| {
                        serde_json::json!({
                            "name": t.name,
                            "description": t.spec.description,
                            "inputSchema": serde_json::from_str::<serde_json::Value>(&t.spec.input_schema).ok(),
                            "plugin": t.plugin.id(),
                        })
                    })
                    .collect();
                println!("{}", serde_json::Value::Array(tools));
            } else {
                for t in host.tools() {
                    let summary = t.spec.description.lines().next().unwrap_or_default();
                    println!("{:<16} {}", t.name, summary);
                }
                println!();
                println!("commands run under: {}", host.sessions().sandbox());
            }
            ExitCode::SUCCESS
        }
        Command::Plugin {
            command: PluginCommand::Inspect { file, json },
        } => match toolhost::inspect::inspect(&file).await {
            Ok(report) => {
                if json {
                    println!("{}", report.to_json());
                } else {
                    print!("{}", report.to_text());
                }
                if report.manifest.is_ok() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                }
            }
            Err(e) => usage_error(e.to_string()),
        },
    }
}

async fn start_host(args: HostArgs) -> Result<Host, ExitCode> {
    let workspace = match args.workspace {
        Some(w) => w,
        None => std::env::current_dir()
            .map_err(|e| usage_error(format!("no current directory: {e}")))?,
    };
    let policy_rules = match &args.policy {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| usage_error(format!("cannot read policy file {}: {e}", path.display())))?,
        None => String::new(),
    };
    let mut config = HostConfig::new(
        workspace,
        args.state_dir.unwrap_or_else(HostConfig::default_state_dir),
    );
    config.policy_rules = policy_rules;
    config.sandbox = SandboxPolicy {
        mode: args.sandbox,
        network: args.allow_network,
        git_writable: false,
    };
    config.plugins = args.plugins;
    config.plugins_dir = args.plugins_dir;
    let host = Host::new(config)
        .await
        .map_err(|e| usage_error(e.to_string()))?;
    if let Some(tty) = toolhost::tty::TtyApprover::if_interactive() {
        host.permissions().add_approver(std::sync::Arc::new(tty));
    }
    Ok(host)
}

fn usage_error(message: String) -> ExitCode {
    eprintln!("toolhost: {message}");
    ExitCode::from(2)
}
