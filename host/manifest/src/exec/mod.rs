//! The exec grant and its judgment of one process start: which commands a plugin may
//! ask `sessions.start` to run, and under what shell, environment and stdin. Step 2 of
//! the permission pipeline (ARCHITECTURE.md, invariant "Exec grant before policy; no grant, no exec"); the policy plugin and approvers still decide after it.
//!
//! - `pattern.rs`: exec patterns, in the shared [`toolhost_pattern`] language;
//! - `env.rs`: the environment names and values a pattern grant lets through;
//! - `stdin.rs`: stdin under a pattern grant (`exec_stdin`);
//! - this module: [`ExecGrant`], [`ExecRequest`], [`Manifest::check_exec`] and its
//!   typed refusal, [`ExecDenial`].
//!
//! # A grant judges the whole request
//!
//! A process start is more than its command text: the environment, the shell
//! and stdin can each make `sleep 1` run anything (`BASH_ENV`, `BASH_FUNC_sleep%%`,
//! `LD_PRELOAD`, `PATH` into the workspace, `shell = /usr/bin/python3`, `sh` fed
//! a script on stdin). [`Manifest::check_exec`] therefore checks, for every
//! grant other than `exec = ["**"]` (which keeps any env, shell and stdin: the
//! policy plugin and approvers judge those requests):
//!
//! - **the command** against `exec` ([`ExecGrant::check`]);
//! - **the shell**: `/bin/sh` ([`DEFAULT_EXEC_SHELL`], the contract's default)
//!   or a path listed in `exec_shells` (absolute paths, compared as written;
//!   [`exec_shell_granted`]). A granted bash reads no startup file: bash acts
//!   on `BASH_ENV`, `BASH_FUNC_*`, `SHELLOPTS`... only from the environment,
//!   which the next rule covers;
//! - **every environment name** the request sets: one of [`SAFE_EXEC_ENV`]
//!   (`LANG`, `LANGUAGE`, `LC_*`, `TZ`, `NO_COLOR`, `FORCE_COLOR`, `CLICOLOR`,
//!   `COLUMNS`, `LINES`, `CI`: names no program runs code or loads a library
//!   from) or one `exec_env` grants, exactly (`NOTES_MODE`) or by prefix
//!   (`NOTES_*`; [`exec_env_granted`]). Nothing else, so no `PATH`, `LD_*`,
//!   `BASH_*`, `ENV`, `IFS`, `PS4`, `PAGER`, `EDITOR` or `GIT_*` unless the
//!   manifest names it;
//! - **the values of the safe default names**: glibc loads a locale from an
//!   absolute path (`LC_ALL=/ws/loc`) and `TZ=/ws/f` makes programs parse a
//!   file the plugin wrote, so without an `exec_env` grant of the name a value
//!   must be plain ([`check_safe_env_value`]): a locale name of
//!   `[A-Za-z0-9_.@-]` (`LANGUAGE` also `:`) without `/` or `..`; a `TZ` not
//!   starting with `/` or `:/`, with no `..` component (`UTC0`,
//!   `EST5EDT,M3.2.0,M11.1.0`, `America/New_York` pass); `COLUMNS`/`LINES`
//!   up to 5 digits; the colour and CI hints up to 16 plain characters. A name
//!   `exec_env` grants (`exec_env = ["TZ"]`) keeps any value: the operator
//!   chose it;
//! - **stdin**: a pattern grant covers the command text, never the bytes fed
//!   on stdin, and the policy never sees them either (`make test -f -` reads a
//!   makefile there, `awk -f /dev/stdin` a program, `rbash` a script). So
//!   stdin, bytes or an open pipe, is refused unless `exec_stdin` grants it
//!   for that command ([`exec_stdin_granted`]): patterns in the same language
//!   as `exec`, each covered by a pattern of `exec` (checked at load,
//!   [`validate_exec_stdin`], [`exec_pattern_covers`]). On top of that, stdin
//!   fed to a program that runs what it reads as code (a shell, an
//!   interpreter, `xargs`, `awk`/`sed`/`make -f -`, or a word naming stdin by
//!   path such as `/dev//stdin`; [`stdin_runs_code`]) is refused even when
//!   `exec_stdin` matches, and such an `exec_stdin` entry is refused at load:
//!   granting it would be `exec = ["**"]` without the policy. That list is
//!   defence in depth (known programs, not a proof); the grant is the rule.
//!
//! Each refusal names the variable, shell or program and the manifest key
//! that would grant it.

mod env;
mod pattern;
mod stdin;

use std::fmt;

pub use env::{
    MAX_SAFE_ENV_VALUE, SAFE_EXEC_ENV, check_safe_env_value, exec_env_granted, validate_exec_env,
};
pub use pattern::{exec_pattern_covers, exec_pattern_matches, validate_exec_pattern};
pub use stdin::{exec_stdin_granted, stdin_runs_code, validate_exec_stdin};

use crate::error::{ValueError, quoted_list};
use crate::schema::{ExecGrant, Manifest};
use env::env_pattern_matches;
use pattern::words;

impl ExecGrant {
    /// Whether the grant covers `command` (the text run as `SHELL -c
    /// COMMAND`). `Err` is the denial: [`ExecDenial::NoGrant`] or
    /// [`ExecDenial::CommandNotGranted`], naming the grant.
    ///
    /// A grant of `**` allows any command. Any other pattern allows only a
    /// single simple command of literal words ([`exec_pattern_matches`]). The
    /// rest of the request (shell, environment, stdin) is judged by
    /// [`Manifest::check_exec`].
    pub fn check(&self, command: &str) -> Result<(), ExecDenial> {
        let patterns = match self {
            ExecGrant::None => return Err(ExecDenial::NoGrant),
            ExecGrant::Patterns(p) => p,
        };
        if self.grants_everything() || patterns.iter().any(|p| exec_pattern_matches(p, command)) {
            Ok(())
        } else {
            Err(ExecDenial::CommandNotGranted {
                patterns: patterns.clone(),
            })
        }
    }

    /// `true` for a grant holding the pattern `**` on its own: every command,
    /// under any shell, with any environment and stdin (the built-in bash
    /// plugin's grant; the policy plugin and approvers judge each request).
    pub fn grants_everything(&self) -> bool {
        match self {
            ExecGrant::None => false,
            ExecGrant::Patterns(p) => p.iter().any(|p| words(p) == ["**"]),
        }
    }
}

impl fmt::Display for ExecGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecGrant::None => f.write_str("none"),
            ExecGrant::Patterns(p) => write!(f, "{}", p.join(", ")),
        }
    }
}

/// One process start as [`Manifest::check_exec`] judges it: the request after
/// the host's hard rules resolved it.
#[derive(Debug, Clone, Copy)]
pub struct ExecRequest<'a> {
    /// The command text, run as `SHELL -c COMMAND`.
    pub command: &'a str,
    /// The resolved shell (an absolute path, as the request wrote it, or
    /// `/bin/sh` when it named none).
    pub shell: &'a str,
    /// The environment pairs the request sets (the names are judged, and the
    /// values of [`SAFE_EXEC_ENV`] names the manifest does not grant).
    pub env: &'a [(String, String)],
    /// Whether the process gets input on stdin (`bytes` or an `open` pipe),
    /// rather than `/dev/null`: under a pattern grant, only for a command
    /// `exec_stdin` grants.
    pub feeds_stdin: bool,
}

/// Why the manifest's exec grant refuses a start ([`Manifest::check_exec`]): which
/// part of the request, and the manifest key that would grant it.
///
/// Its `Display` is the text the plugin gets after `denied by manifest: ` (the
/// permission pipeline's prefix): [`ExecDenial::reason`], then the
/// [`ExecDenial::hint`] in parentheses when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecDenial {
    /// The manifest grants no exec at all.
    NoGrant,
    /// The command matches no pattern of the grant.
    CommandNotGranted {
        /// The grant's patterns.
        patterns: Vec<String>,
    },
    /// The shell is neither [`DEFAULT_EXEC_SHELL`] nor in `exec_shells`.
    ShellNotGranted {
        /// The resolved shell.
        shell: String,
    },
    /// A safe default name ([`SAFE_EXEC_ENV`]) with a value [`check_safe_env_value`]
    /// refuses, and no `exec_env` grant of the name.
    EnvValue {
        /// The variable.
        name: String,
        /// The rule its value breaks.
        rule: &'static str,
    },
    /// An environment name outside [`SAFE_EXEC_ENV`] that `exec_env` does not grant.
    EnvName {
        /// The variable.
        name: String,
    },
    /// Stdin fed to a program that runs what it reads as code ([`stdin_runs_code`]).
    StdinRunsCode {
        /// The word that runs stdin.
        word: String,
    },
    /// Stdin fed to a command `exec_stdin` does not grant.
    StdinNotGranted {
        /// The command, its words joined by single spaces.
        command: String,
    },
}

/// Longest command an [`ExecDenial::StdinNotGranted`] hint quotes as the pattern to
/// grant (bytes); a longer one gets `PATTERN`.
const HINT_COMMAND_MAX: usize = 200;

impl ExecDenial {
    /// What is refused, without the hint.
    pub fn reason(&self) -> String {
        match self {
            ExecDenial::NoGrant => "the plugin's manifest grants no exec".to_string(),
            ExecDenial::CommandNotGranted { patterns } => format!(
                "the command does not match the plugin's exec grant ({}); a pattern matches one \
                 simple command word by word, without shell metacharacters",
                quoted_list(patterns)
            ),
            ExecDenial::ShellNotGranted { shell } => format!(
                "the plugin's manifest does not grant the shell `{shell}`: a pattern grant runs \
                 commands with {DEFAULT_EXEC_SHELL}"
            ),
            ExecDenial::EnvValue { name, rule } => format!(
                "the plugin's manifest does not let its commands get this value of the \
                 environment variable `{name}`: without a grant of the name, its value must be \
                 {rule}"
            ),
            ExecDenial::EnvName { name } => format!(
                "the plugin's manifest does not let its commands get the environment variable \
                 `{name}`: without a grant only {} are allowed",
                SAFE_EXEC_ENV.join(", ")
            ),
            ExecDenial::StdinRunsCode { word } => format!(
                "the command feeds stdin to `{word}`, which runs what it reads as code; a \
                 pattern grant covers the command text, never stdin, and no `exec_stdin` entry \
                 grants this"
            ),
            ExecDenial::StdinNotGranted { .. } => {
                "the plugin's manifest does not let this command read stdin: a pattern grant \
                 covers the command text, never what is fed on stdin"
                    .to_string()
            }
        }
    }

    /// How to allow it (the manifest key to add, or what to do instead), when there is
    /// a way.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            ExecDenial::NoGrant => {
                "add `exec = [\"PATTERN\"]` to its manifest to allow commands".to_string()
            }
            ExecDenial::CommandNotGranted { .. } => return None,
            ExecDenial::ShellNotGranted { shell } => {
                format!("grant it with `exec_shells = [\"{shell}\"]`")
            }
            ExecDenial::EnvValue { name, .. } => {
                format!("grant any value with `exec_env = [\"{name}\"]`")
            }
            ExecDenial::EnvName { name } if validate_exec_env(name).is_ok() => {
                format!("grant it with `exec_env = [\"{name}\"]`")
            }
            ExecDenial::EnvName { .. } => {
                "no `exec_env` entry can name it; only `exec = [\"**\"]` keeps any environment"
                    .to_string()
            }
            ExecDenial::StdinRunsCode { .. } => "start it with stdin closed, or grant `exec = \
                 [\"**\"]` so the policy and approvers judge it"
                .to_string(),
            ExecDenial::StdinNotGranted { command } => {
                let how = if command.len() <= HINT_COMMAND_MAX {
                    format!("`exec_stdin = [\"{command}\"]`")
                } else {
                    "`exec_stdin = [\"PATTERN\"]`".to_string()
                };
                format!(
                    "start it with stdin closed, or grant stdin with {how}; each `exec_stdin` \
                     pattern must also be covered by `exec`"
                )
            }
        })
    }
}

impl fmt::Display for ExecDenial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason())?;
        match self.hint() {
            Some(hint) => write!(f, " ({hint})"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for ExecDenial {}

/// The shell a pattern grant runs commands under unless the manifest's
/// `exec_shells` grants more: the contract's default, `/bin/sh`.
pub const DEFAULT_EXEC_SHELL: &str = "/bin/sh";

/// May a plugin whose manifest grants `exec_shells = granted` run a command
/// under `shell` (under a pattern grant other than `**`)? Yes for
/// [`DEFAULT_EXEC_SHELL`] and for a path `granted` lists, compared as written
/// (`/usr/bin/bash` is not `/bin/bash`). Pure.
pub fn exec_shell_granted(shell: &str, granted: &[String]) -> bool {
    shell == DEFAULT_EXEC_SHELL || granted.iter().any(|g| g == shell)
}

/// Checks an `exec_shells` entry: an absolute path without `.`/`..`
/// components, NUL or control characters. Whether it exists is checked per
/// request by the host's hard rules.
pub fn validate_exec_shell(shell: &str) -> Result<(), ValueError> {
    let ok = shell.starts_with('/')
        && !shell.chars().any(char::is_control)
        && !shell.split('/').any(|c| c == "." || c == "..");
    if ok {
        Ok(())
    } else {
        Err(ValueError::ShellPath(shell.to_string()))
    }
}

impl Manifest {
    /// The manifest's exec step of the permission pipeline: may this plugin
    /// start `request` (already resolved by the host's hard rules)? `Err` is the
    /// [`ExecDenial`], naming the command, shell, variable or program and the
    /// manifest key that would grant it.
    ///
    /// No exec grant: denied. `exec = ["**"]`: any command, shell, environment
    /// and stdin. Any other grant: the command must match a pattern
    /// ([`ExecGrant::check`]), the shell must be [`DEFAULT_EXEC_SHELL`] or in
    /// `exec_shells` ([`exec_shell_granted`]), every environment name must be
    /// in `exec_env` ([`exec_env_granted`]) or in [`SAFE_EXEC_ENV`] with a value
    /// [`check_safe_env_value`] accepts, and stdin (bytes or open) is fed only to
    /// a command `exec_stdin` grants ([`exec_stdin_granted`]) and never to a
    /// program that runs it as code ([`stdin_runs_code`]).
    /// Why each part is judged: the module docs of `exec/mod.rs`.
    pub fn check_exec(&self, request: &ExecRequest<'_>) -> Result<(), ExecDenial> {
        self.exec.check(request.command)?;
        if self.exec.grants_everything() {
            return Ok(());
        }
        if !exec_shell_granted(request.shell, &self.exec_shells) {
            return Err(ExecDenial::ShellNotGranted {
                shell: request.shell.to_string(),
            });
        }
        for (name, value) in request.env {
            if self.exec_env.iter().any(|p| env_pattern_matches(p, name)) {
                // Granted by name: the operator chose it, any value.
                continue;
            }
            if exec_env_granted(name, &[]) {
                if let Err(rule) = check_safe_env_value(name, value) {
                    return Err(ExecDenial::EnvValue {
                        name: name.clone(),
                        rule,
                    });
                }
                continue;
            }
            return Err(ExecDenial::EnvName { name: name.clone() });
        }
        if request.feeds_stdin {
            if let Some(word) = stdin_runs_code(request.command) {
                return Err(ExecDenial::StdinRunsCode {
                    word: word.to_string(),
                });
            }
            if !exec_stdin_granted(request.command, &self.exec_stdin) {
                return Err(ExecDenial::StdinNotGranted {
                    command: words(request.command).join(" "),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_grant_check() {
        let none = ExecGrant::None;
        assert!(
            none.check("ls")
                .unwrap_err()
                .to_string()
                .contains("grants no exec")
        );
        assert!(!none.grants_everything());
        let some = ExecGrant::Patterns(vec!["git status".into()]);
        assert!(some.check("git status").is_ok());
        assert!(
            some.check("ls")
                .unwrap_err()
                .to_string()
                .contains("`git status`")
        );
        assert!(!some.grants_everything());
        let all = ExecGrant::Patterns(vec!["git status".into(), " ** ".into()]);
        assert!(all.check("a; b").is_ok());
        assert!(all.grants_everything());
    }

    /// (shell, exec_shells grant, allowed)
    const SHELL_CASES: &[(&str, &[&str], bool)] = &[
        ("/bin/sh", &[], true),
        ("/bin/bash", &[], false),
        ("/usr/bin/sh", &[], false),
        ("/bin/dash", &[], false),
        ("/usr/bin/python3", &[], false),
        ("/bin/bash", &["/bin/bash"], true),
        ("/usr/bin/bash", &["/bin/bash"], false),
        ("/bin/zsh", &["/bin/bash"], false),
        ("/bin/sh", &["/bin/bash"], true),
    ];

    #[test]
    fn exec_shell_table() {
        for (shell, granted, expected) in SHELL_CASES {
            let granted: Vec<String> = granted.iter().map(|g| g.to_string()).collect();
            assert_eq!(
                exec_shell_granted(shell, &granted),
                *expected,
                "{shell:?} under exec_shells = {granted:?}"
            );
        }
        assert!(validate_exec_shell("/bin/bash").is_ok());
        for bad in ["bash", "", "/bin/../tmp/x", "/bin/./bash", "/bin/ba\nsh"] {
            assert!(validate_exec_shell(bad).is_err(), "{bad:?}");
        }
    }

    fn exec_manifest(exec: &[&str], env: &[&str], shells: &[&str]) -> Manifest {
        Manifest {
            exec: ExecGrant::Patterns(exec.iter().map(|p| p.to_string()).collect()),
            exec_env: env.iter().map(|p| p.to_string()).collect(),
            exec_shells: shells.iter().map(|p| p.to_string()).collect(),
            ..Manifest::deny_all("p")
        }
    }

    fn request<'a>(
        command: &'a str,
        shell: &'a str,
        env: &'a [(String, String)],
        feeds_stdin: bool,
    ) -> ExecRequest<'a> {
        ExecRequest {
            command,
            shell,
            env,
            feeds_stdin,
        }
    }

    #[test]
    fn check_exec_judges_the_whole_request() {
        let pair = |k: &str| vec![(k.to_string(), "v".to_string())];
        let sleep = exec_manifest(&["sleep *", "sh", "cat"], &["NOTES_*"], &[]);
        assert_eq!(
            sleep.check_exec(&request("sleep 1", "/bin/sh", &[], false)),
            Ok(())
        );
        assert_eq!(
            sleep.check_exec(&request("sleep 1", "/bin/sh", &pair("LANG"), false)),
            Ok(())
        );
        assert_eq!(
            sleep.check_exec(&request("sleep 1", "/bin/sh", &pair("NOTES_MODE"), false)),
            Ok(())
        );
        let e = sleep
            .check_exec(&request("sleep 1", "/bin/sh", &pair("BASH_ENV"), false))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`BASH_ENV`") && e.contains("exec_env = [\"BASH_ENV\"]"),
            "{e}"
        );
        let e = sleep
            .check_exec(&request(
                "sleep 1",
                "/bin/sh",
                &pair("BASH_FUNC_sleep%%"),
                false,
            ))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`BASH_FUNC_sleep%%`") && e.contains("only `exec = [\"**\"]`"),
            "{e}"
        );
        let e = sleep
            .check_exec(&request("sleep 1", "/bin/bash", &[], false))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`/bin/bash`") && e.contains("exec_shells = [\"/bin/bash\"]"),
            "{e}"
        );
        let e = sleep
            .check_exec(&request("sh", "/bin/sh", &[], true))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("feeds stdin to `sh`") && e.contains("exec_stdin"),
            "{e}"
        );
        assert_eq!(
            sleep.check_exec(&request("sh", "/bin/sh", &[], false)),
            Ok(())
        );
        // Stdin needs `exec_stdin`, even for `cat`.
        let e = sleep
            .check_exec(&request("cat", "/bin/sh", &[], true))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("does not let this command read stdin")
                && e.contains("`exec_stdin = [\"cat\"]`"),
            "{e}"
        );
        let cat = Manifest {
            exec_stdin: vec!["cat".into()],
            ..sleep.clone()
        };
        assert_eq!(
            cat.check_exec(&request("cat", "/bin/sh", &[], true)),
            Ok(())
        );
        // The command is judged first.
        let e = sleep
            .check_exec(&request("ls", "/bin/bash", &pair("BASH_ENV"), true))
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not match"), "{e}");
        let bash = exec_manifest(&["sleep *"], &[], &["/bin/bash"]);
        assert_eq!(
            bash.check_exec(&request("sleep 1", "/bin/bash", &[], false)),
            Ok(())
        );
        assert!(
            bash.check_exec(&request("sleep 1", "/bin/bash", &pair("BASH_ENV"), false))
                .is_err()
        );
        // `**` keeps any shell, env and stdin.
        let all = exec_manifest(&["**"], &[], &[]);
        assert_eq!(
            all.check_exec(&request("sh", "/usr/bin/python3", &pair("BASH_ENV"), true)),
            Ok(())
        );
        let none = Manifest::deny_all("p");
        assert!(
            none.check_exec(&request("sleep 1", "/bin/sh", &[], false))
                .unwrap_err()
                .to_string()
                .contains("grants no exec")
        );
    }

    #[test]
    fn stdin_needs_exec_stdin_under_a_pattern_grant() {
        let m = Manifest {
            exec_stdin: vec!["wc -l".into(), "jq *".into()],
            ..exec_manifest(
                &["make test *", "awk *", "rbash", "wc -l", "jq *", "cat *"],
                &[],
                &[],
            )
        };
        let ok = |c: &str| m.check_exec(&request(c, "/bin/sh", &[], true));
        assert_eq!(ok("wc -l"), Ok(()));
        assert_eq!(ok("jq -r .x"), Ok(()));
        assert_eq!(ok("jq"), Ok(()));
        // Every bypass of the old denylist, with its grant in `exec`.
        for bypass in [
            "make test -f -",
            "make test",
            "awk -f /dev//stdin",
            "awk -f/dev/stdin",
            "awk -f /proc/self/fd//0",
            "awk -f /dev/fd/./0",
            "awk -f /proc/thread-self/fd/0",
            "awk -F: -f prog.awk",
            "rbash",
            "cat",
            "cat -",
        ] {
            let e = ok(bypass).unwrap_err().to_string();
            assert!(e.contains("exec_stdin"), "{bypass}: {e}");
            // The same commands with stdin closed are what `exec` grants.
            assert_eq!(
                m.check_exec(&request(bypass, "/bin/sh", &[], false)),
                Ok(()),
                "{bypass}"
            );
        }
        // A granted pattern never lets stdin reach a program that runs it.
        assert!(
            ok("jq -f /dev/stdin")
                .unwrap_err()
                .to_string()
                .contains("runs what it reads as code")
        );
        // `**` keeps any stdin.
        let all = exec_manifest(&["**"], &[], &[]);
        assert_eq!(
            all.check_exec(&request("make -f -", "/bin/sh", &[], true)),
            Ok(())
        );
    }

    #[test]
    fn unsafe_env_values_are_refused_unless_granted() {
        let pair = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        let m = exec_manifest(&["date *"], &["NOTES_*"], &[]);
        let e = m
            .check_exec(&request(
                "date",
                "/bin/sh",
                &pair("LC_ALL", "/tmp/x"),
                false,
            ))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`LC_ALL`")
                && e.contains("a locale name")
                && e.contains("exec_env = [\"LC_ALL\"]"),
            "{e}"
        );
        let e = m
            .check_exec(&request("date", "/bin/sh", &pair("TZ", "/ws/f"), false))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`TZ`") && e.contains("exec_env = [\"TZ\"]"),
            "{e}"
        );
        for (k, v) in [("LC_ALL", "C.UTF-8"), ("TZ", "America/New_York")] {
            assert_eq!(
                m.check_exec(&request("date", "/bin/sh", &pair(k, v), false)),
                Ok(())
            );
        }
        // A name `exec_env` grants keeps any value: the operator chose it.
        for granted in ["TZ", "LC_*", "LC_ALL"] {
            let m = exec_manifest(&["date *"], &[granted], &[]);
            let name = if granted == "TZ" { "TZ" } else { "LC_ALL" };
            assert_eq!(
                m.check_exec(&request("date", "/bin/sh", &pair(name, "/ws/x"), false)),
                Ok(()),
                "{granted}"
            );
        }
        // `**` keeps any env.
        let all = exec_manifest(&["**"], &[], &[]);
        assert_eq!(
            all.check_exec(&request("date", "/bin/sh", &pair("TZ", "/ws/f"), false)),
            Ok(())
        );
    }

    /// The texts plugins have always been given (after `denied by manifest: `), one
    /// per denial, byte for byte.
    #[test]
    fn denials_keep_their_text() {
        let pair = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        let m = exec_manifest(&["git status", "sh", "cat", "date"], &[], &[]);
        let deny = |r: ExecRequest<'_>| m.check_exec(&r).unwrap_err().to_string();
        let cases = [
            (
                Manifest::deny_all("p")
                    .check_exec(&request("ls", "/bin/sh", &[], false))
                    .unwrap_err()
                    .to_string(),
                "the plugin's manifest grants no exec (add `exec = [\"PATTERN\"]` to its \
                 manifest to allow commands)"
                    .to_string(),
            ),
            (
                deny(request("ls", "/bin/sh", &[], false)),
                "the command does not match the plugin's exec grant (`git status`, `sh`, `cat`, \
                 `date`); a pattern matches one simple command word by word, without shell \
                 metacharacters"
                    .to_string(),
            ),
            (
                deny(request("git status", "/bin/bash", &[], false)),
                "the plugin's manifest does not grant the shell `/bin/bash`: a pattern grant \
                 runs commands with /bin/sh (grant it with `exec_shells = [\"/bin/bash\"]`)"
                    .to_string(),
            ),
            (
                deny(request("date", "/bin/sh", &pair("COLUMNS", "x"), false)),
                "the plugin's manifest does not let its commands get this value of the \
                 environment variable `COLUMNS`: without a grant of the name, its value must be \
                 at most 5 decimal digits (grant any value with `exec_env = [\"COLUMNS\"]`)"
                    .to_string(),
            ),
            (
                deny(request("date", "/bin/sh", &pair("BASH_ENV", "x"), false)),
                "the plugin's manifest does not let its commands get the environment variable \
                 `BASH_ENV`: without a grant only LANG, LANGUAGE, LC_*, TZ, NO_COLOR, \
                 FORCE_COLOR, CLICOLOR, COLUMNS, LINES, CI are allowed (grant it with `exec_env \
                 = [\"BASH_ENV\"]`)"
                    .to_string(),
            ),
            (
                deny(request("date", "/bin/sh", &pair("A-B", "x"), false)),
                "the plugin's manifest does not let its commands get the environment variable \
                 `A-B`: without a grant only LANG, LANGUAGE, LC_*, TZ, NO_COLOR, FORCE_COLOR, \
                 CLICOLOR, COLUMNS, LINES, CI are allowed (no `exec_env` entry can name it; \
                 only `exec = [\"**\"]` keeps any environment)"
                    .to_string(),
            ),
            (
                deny(request("sh", "/bin/sh", &[], true)),
                "the command feeds stdin to `sh`, which runs what it reads as code; a pattern \
                 grant covers the command text, never stdin, and no `exec_stdin` entry grants \
                 this (start it with stdin closed, or grant `exec = [\"**\"]` so the policy and \
                 approvers judge it)"
                    .to_string(),
            ),
            (
                deny(request("cat", "/bin/sh", &[], true)),
                "the plugin's manifest does not let this command read stdin: a pattern grant \
                 covers the command text, never what is fed on stdin (start it with stdin \
                 closed, or grant stdin with `exec_stdin = [\"cat\"]`; each `exec_stdin` \
                 pattern must also be covered by `exec`)"
                    .to_string(),
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
        let long = format!("cat {}", "x".repeat(300));
        let m = exec_manifest(&["cat *"], &[], &[]);
        let e = m
            .check_exec(&request(&long, "/bin/sh", &[], true))
            .unwrap_err();
        assert!(
            e.to_string().contains("`exec_stdin = [\"PATTERN\"]`"),
            "{e}"
        );
        assert_eq!(
            e.hint().map(|h| e.to_string().ends_with(&format!("({h})"))),
            Some(true)
        );
        assert_eq!(
            ExecGrant::Patterns(vec!["a".into()])
                .check("b")
                .unwrap_err()
                .hint(),
            None
        );
    }
}
