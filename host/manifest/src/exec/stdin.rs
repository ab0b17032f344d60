//! Stdin under a pattern grant: a grant covers the command text, never the bytes
//! fed on stdin, so stdin needs the manifest's `exec_stdin` ([`exec_stdin_granted`],
//! checked at load by [`validate_exec_stdin`]), and never reaches a program that runs
//! what it reads as code ([`stdin_runs_code`]).

use super::pattern::{exec_pattern_covers, exec_pattern_matches, validate_exec_pattern, words};
use crate::error::ValueError;
use crate::schema::ExecGrant;

/// Programs that run what they read on stdin as code when started without a
/// script (shells, interpreters, debuggers and database shells with a `!`/
/// `.system` escape, editors with `:!`), or that turn stdin into a command line
/// (`xargs`). Wrappers (`env`, `timeout`, `nice`...) need no entry: the program
/// they run is another word of the command.
/// Matched on a word's basename, with a version suffix removed (`python3.12`).
const STDIN_RUNNERS: &[&str] = &[
    "sh", "bash", "rbash", "dash", "ash", "zsh", "ksh", "rksh", "mksh", "pdksh", "oksh", "loksh",
    "posh", "yash", "fish", "csh", "tcsh", "elvish", "nu", "xonsh", "pwsh", "busybox", "toybox",
    "xargs", "python", "pypy", "perl", "ruby", "irb", "node", "nodejs", "deno", "bun", "php",
    "lua", "luajit", "tclsh", "wish", "expect", "R", "Rscript", "julia", "gdb", "lldb", "sqlite",
    "mysql", "psql", "ed", "ex", "vi", "vim", "nvim", "dc", "bc",
];

/// Programs that read their program from stdin when a script-file option
/// names `-` (`awk -f -`, `sed -f -`, `make -f -`).
const STDIN_SCRIPT_FLAG: &[&str] = &[
    "awk", "gawk", "mawk", "nawk", "sed", "gsed", "make", "gmake", "bmake",
];

/// Would feeding stdin to `command` run it as code? `Some(word)` names the
/// word that makes it so: a program of [`STDIN_RUNNERS`] anywhere in the
/// command (so wrappers such as `timeout 5 sh` count), `awk`/`sed`/`make` with
/// a script file `-` (`-f -`, `-f-`, `--file=-`, `--makefile=-`), or a word
/// naming stdin by path, however spelled (`/dev/stdin`, `/dev//stdin`,
/// `/dev/fd/./0`, `/proc/self/fd/0`, `/proc/thread-self/fd/0`, `/proc/1/fd/0`,
/// also inside an option such as `-f/dev/stdin` or `--file=/dev/stdin`).
///
/// A list of known programs, not a proof: under a pattern grant stdin needs
/// an `exec_stdin` grant first ([`exec_stdin_granted`]); this is the extra
/// refusal that no `exec_stdin` entry overrides. Pure.
pub fn stdin_runs_code(command: &str) -> Option<&str> {
    let words = words(command);
    let base = |w: &str| -> String {
        let b = w.rsplit('/').next().unwrap_or(w);
        b.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.')
            .to_string()
    };
    let script_flag = words
        .windows(2)
        .any(|w| matches!(w[0], "-f" | "--file" | "--makefile" | "--script") && w[1] == "-")
        || words
            .iter()
            .any(|w| matches!(*w, "-f-" | "--file=-" | "--makefile=-" | "--script=-"));
    words.iter().copied().find(|w| {
        let b = base(w);
        STDIN_RUNNERS.contains(&b.as_str())
            || (script_flag && STDIN_SCRIPT_FLAG.contains(&b.as_str()))
            || names_stdin_path(w)
    })
}

/// Does `word` hold a path to the process's stdin? The path is the part from
/// the first `/` (so `-f/dev/stdin` and `--file=/dev/stdin` count), normalised
/// lexically (`//`, `.`, `..`), compared with `/dev/stdin`, `/dev/fd/0` and
/// `/proc/{self,thread-self,N}[/task/{N}]/fd/0`.
fn names_stdin_path(word: &str) -> bool {
    let Some(at) = word.find('/') else {
        return false;
    };
    let mut parts: Vec<&str> = Vec::new();
    for c in word[at..].split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let pid = |c: &str| {
        matches!(c, "self" | "thread-self")
            || (!c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()))
    };
    let tid = |c: &str| !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit());
    match parts.as_slice() {
        ["dev", "stdin"] | ["dev", "fd", "0"] => true,
        ["proc", p, "fd", "0"] => pid(p),
        ["proc", p, "task", t, "fd", "0"] => pid(p) && tid(t),
        _ => false,
    }
}

/// May a plugin whose manifest grants `exec_stdin = granted` feed stdin
/// (bytes or an open pipe) to `command` (under a pattern grant other than
/// `**`)? Yes when a pattern of `granted` matches the command
/// ([`exec_pattern_matches`]). Programs that run stdin as code are refused
/// after this by [`stdin_runs_code`], granted or not. Pure.
pub fn exec_stdin_granted(command: &str, granted: &[String]) -> bool {
    granted.iter().any(|p| exec_pattern_matches(p, command))
}

/// Checks an `exec_stdin` entry against the manifest's `exec` grant: an exec
/// pattern ([`validate_exec_pattern`]) that a pattern of `exec` covers
/// ([`exec_pattern_covers`]; `exec_stdin` grants stdin, never a command), and
/// not one that feeds stdin to a program that runs it as code
/// ([`stdin_runs_code`]: only `exec = ["**"]` keeps that, judged by the policy).
pub fn validate_exec_stdin(pattern: &str, exec: &ExecGrant) -> Result<(), ValueError> {
    validate_exec_pattern(pattern)?;
    let ExecGrant::Patterns(granted) = exec else {
        return Err(ValueError::WithoutExec);
    };
    if !granted.iter().any(|g| exec_pattern_covers(g, pattern)) {
        return Err(ValueError::StdinNotCovered {
            pattern: pattern.to_string(),
            granted: granted.clone(),
        });
    }
    if let Some(word) = stdin_runs_code(pattern) {
        return Err(ValueError::StdinRunsCode {
            pattern: pattern.to_string(),
            word: word.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (command, the word that runs stdin as code)
    const STDIN_CASES: &[(&str, Option<&str>)] = &[
        ("sh", Some("sh")),
        ("bash -s", Some("bash")),
        ("/bin/bash", Some("/bin/bash")),
        ("python3", Some("python3")),
        ("python3.12 -", Some("python3.12")),
        ("timeout 5 sh", Some("sh")),
        ("nice -n 5 perl", Some("perl")),
        ("xargs echo", Some("xargs")),
        ("cat /dev/stdin", Some("/dev/stdin")),
        ("awk -f -", Some("awk")),
        ("sqlite3 db", Some("sqlite3")),
        // the review's bypasses of the old list
        ("make test -f -", Some("make")),
        ("make -f- test", Some("make")),
        ("make --file=- test", Some("make")),
        ("make --makefile=-", Some("make")),
        ("awk -f /dev//stdin", Some("/dev//stdin")),
        ("awk -f/dev/stdin", Some("-f/dev/stdin")),
        ("awk --file=/dev/stdin", Some("--file=/dev/stdin")),
        ("awk -f /proc/self/fd//0", Some("/proc/self/fd//0")),
        ("awk -f /dev/fd/./0", Some("/dev/fd/./0")),
        (
            "awk -f /proc/thread-self/fd/0",
            Some("/proc/thread-self/fd/0"),
        ),
        ("awk -f /proc/1/task/1/fd/0", Some("/proc/1/task/1/fd/0")),
        ("awk -f /dev/../dev/stdin", Some("/dev/../dev/stdin")),
        ("sed -f - x", Some("sed")),
        ("rbash", Some("rbash")),
        ("/usr/bin/rbash -s", Some("/usr/bin/rbash")),
        ("make test", None),
        ("make test -f Makefile", None),
        ("awk -f prog.awk", None),
        ("cat /dev/stdout", None),
        ("cat /proc/self/fd/1", None),
        ("cat /dev/fd/01x", None),
        ("cat", None),
        ("sed s/a/b/", None),
        ("awk {print}", None),
        ("grep -c x", None),
        ("wc -l", None),
        ("sleep 1", None),
    ];

    #[test]
    fn stdin_runs_code_table() {
        for (command, expected) in STDIN_CASES {
            assert_eq!(stdin_runs_code(command), *expected, "{command:?}");
        }
    }

    /// (exec grant, exec_stdin entry, valid at load)
    const EXEC_STDIN_LOAD: &[(&[&str], &str, bool)] = &[
        (&["wc -l"], "wc -l", true),
        (&["wc *"], "wc -l", true),
        (&["wc *"], "wc -l *", true),
        (&["wc *"], "wc **", true),
        (&["jq *"], "jq *", true),
        (&["jq **"], "jq -r *", true),
        (&["git * **"], "git log *", true),
        (&["git * --help"], "git log --help", true),
        (&["git * --help"], "git * --help", true),
        (&["npm run test:*"], "npm run test:*", true),
        (&["npm run test:*"], "npm run test:unit", true),
        (&["npm run test:*"], "npm run test:*x", true),
        (&["ls", "wc *"], "wc -c", true),
        (&["**"], "anything here", true),
        (&["**"], "**", true),
        // not covered: stdin never grants a command
        (&["wc -l"], "wc -c", false),
        (&["wc -l"], "wc *", false),
        (&["wc -l"], "wc -l *", false),
        (&["wc -l *"], "wc *", false),
        (&["git * b"], "git ** b", false),
        (&["git * b"], "git * * b", false),
        (&["a x*"], "a *", false),
        (&["npm run test:*"], "npm run *", false),
        (&["npm run test:*"], "npm run *:x", false),
        (&["jq *"], "jqx *", false),
        (&["wc -l"], "**", false),
        // malformed
        (&["wc -l"], "", false),
        (&["wc *"], "wc -l;id", false),
        // covered, but stdin to a program that runs it as code: only `**`
        (&["sh"], "sh", false),
        (&["python3 *"], "python3 -", false),
        (&["timeout *"], "timeout 5 sh", false),
        (&["make test *"], "make test -f -", false),
        (&["awk *"], "awk -f /dev//stdin", false),
        (&["rbash"], "rbash", false),
    ];

    #[test]
    fn exec_stdin_validation_table() {
        for (exec, entry, expected) in EXEC_STDIN_LOAD {
            let exec = ExecGrant::Patterns(exec.iter().map(|p| p.to_string()).collect());
            let result = validate_exec_stdin(entry, &exec);
            assert_eq!(
                result.is_ok(),
                *expected,
                "{entry:?} under exec = [{exec}]: {result:?}"
            );
        }
        let e = validate_exec_stdin("wc -c", &ExecGrant::Patterns(vec!["wc -l".into()]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not covered by the `exec` grant (`wc -l`)"),
            "{e}"
        );
        let e = validate_exec_stdin("sh", &ExecGrant::Patterns(vec!["sh".into()]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`sh`") && e.contains("only `exec = [\"**\"]`"),
            "{e}"
        );
        assert!(validate_exec_stdin("wc -l", &ExecGrant::None).is_err());
    }
}
