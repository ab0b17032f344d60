//! What a process start asks for besides its command text: the environment
//! names it sets and the shell that runs it (WIT `process-start.env-keys` and
//! `shell`). Both can make an allowed command run anything: `sleep 1` with
//! `BASH_ENV=./x`, `BASH_FUNC_sleep%%=…`, `LD_PRELOAD=…` or `PATH=./bin`, or
//! under `shell = /usr/bin/python3`.
//!
//! - An environment name in the harmless list (`LANG`, `LC_*`, `TZ`,
//!   `NO_COLOR`, `TERM`, `CI`, `RUST_LOG`…, the same list as `VAR=value` in the
//!   command) is fine.
//! - A name that makes the shell, the dynamic loader or a common program run
//!   other code ([`env_runs_code`]: `BASH_ENV`, `ENV`, `BASH_*`, `LD_*`, `IFS`,
//!   `PS4`, `SHELLOPTS`, `PATH`, `HOME`, `GIT_*`, `PAGER`…) is an *issue*:
//!   asked even under `default = "allow"`, denied under `default = "deny"`.
//!   The rules cannot allow it: they have no syntax for environment names, and
//!   a person should see it (the prompt names it; values are withheld).
//! - Any other name is an *effect*, like `VAR=value` in the command: asked
//!   unless `default = "allow"`.
//! - A shell other than the POSIX shells the policy parses ([`KNOWN_SHELLS`])
//!   is an issue too: the policy judged the text as shell syntax, which another
//!   interpreter reads differently.
//!
//! The policy never sees stdin: a rule allowing a shell or an interpreter
//! (`python3 *`, `bash *`) allows whatever it reads on stdin, as it allows
//! `bash script.sh` (the host refuses stdin to such programs under a manifest
//! pattern grant: toolhost-manifest's `exec::stdin::stdin_runs_code`). Inline
//! code (`python3 -c …`) is at most asked when the rules have deny or ask
//! rules (see the crate docs).

/// Environment variables a command (`VAR=value cmd`) or a request's
/// `env-keys` may set without making it at most ask.
pub(crate) fn harmless_env(name: &str) -> bool {
    matches!(
        name,
        "LANG"
            | "LANGUAGE"
            | "TZ"
            | "NO_COLOR"
            | "FORCE_COLOR"
            | "CLICOLOR"
            | "COLUMNS"
            | "TERM"
            | "CI"
            | "RUST_BACKTRACE"
            | "RUST_LOG"
    ) || name.starts_with("LC_")
}

/// Shells whose language the policy parses (bash's grammar covers POSIX `sh`
/// and `dash`): the contract's default `/bin/sh` and where the built-in bash
/// tool finds bash. Compared as written.
pub const KNOWN_SHELLS: &[&str] = &[
    "/bin/sh",
    "/usr/bin/sh",
    "/bin/bash",
    "/usr/bin/bash",
    "/usr/local/bin/bash",
    "/bin/dash",
    "/usr/bin/dash",
];

/// Names that make bash, `ld.so`, glibc or a common program run other code or
/// find other programs or configuration.
const CODE_NAMES: &[&str] = &[
    "ENV",
    "SHELLOPTS",
    "IFS",
    "PS1",
    "PS2",
    "PS3",
    "PS4",
    "PROMPT_COMMAND",
    "PATH",
    "CDPATH",
    "GLOBIGNORE",
    "HOME",
    "ZDOTDIR",
    "XDG_CONFIG_HOME",
    "INPUTRC",
    "TERMINFO",
    "GCONV_PATH",
    "GLIBC_TUNABLES",
    "LOCPATH",
    "NLSPATH",
    "HOSTALIASES",
    "PAGER",
    "MANPAGER",
    "EDITOR",
    "VISUAL",
    "BROWSER",
    "SHELL",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "CLASSPATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "RUSTC",
    "RUSTC_WRAPPER",
    "CC",
    "CXX",
    "MAKEFLAGS",
];

/// Prefixes of such names (`BASH_ENV`, `BASH_FUNC_f%%`, `BASHOPTS`, `LD_PRELOAD`…).
const CODE_PREFIXES: &[&str] = &[
    "BASH",
    "LD_",
    "DYLD_",
    "GIT_",
    "PYTHON",
    "PERL",
    "RUBY",
    "NODE_",
    "NPM_CONFIG_",
    "MALLOC_",
    "CARGO_",
    "LESS",
    "KSH_",
];

/// Does setting the environment variable `name` make the shell, the dynamic
/// loader or a common program run other code (or find other programs)? A
/// known list, plus any name that is not a plain identifier (bash imports
/// functions from `BASH_FUNC_f%%` and, in old versions, `f()`-style names).
pub fn env_runs_code(name: &str) -> bool {
    let plain = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    !plain || CODE_NAMES.contains(&name) || CODE_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// What the request's environment names and shell add to the judgement of
/// its command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// Asked even under `default = "allow"`, denied under `default = "deny"`:
    /// names that run code, an unknown shell.
    pub issues: Vec<String>,
    /// Asked unless `default = "allow"`: other names outside the harmless list.
    pub effects: Vec<String>,
}

/// Judges `env_keys` and `shell` (empty: the default `/bin/sh`).
pub fn findings(env_keys: &[String], shell: &str) -> Findings {
    let mut out = Findings::default();
    for name in env_keys {
        if harmless_env(name) {
            continue;
        }
        if env_runs_code(name) {
            out.issues.push(format!(
                "the request sets the environment variable `{name}`, which can make the shell, \
                 the dynamic loader or the program run other code"
            ));
        } else {
            out.effects.push(format!(
                "the request sets the environment variable `{name}` for the command"
            ));
        }
    }
    if !shell.is_empty() && !KNOWN_SHELLS.contains(&shell) {
        out.issues.push(format!(
            "the command runs under `{shell}`, not a shell the policy knows ({}); it judged the \
             text as shell syntax",
            KNOWN_SHELLS.join(", ")
        ));
    }
    out
}
