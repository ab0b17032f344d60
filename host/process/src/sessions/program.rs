//! The program a command's first word names, found the way the shell will find
//! it, and the `PATH` it is found on (docs/permissions.md#what-a-rule-and-an-answer-cover).
//!
//! A rule or a remembered answer for `ls` means the program the kernel will
//! execute, not the text `ls`: with an empty or relative `PATH` entry (`:`,
//! `.`, `bin`) the shell searches the working directory, so a workspace file
//! named `ls` would run under `allow = ["ls"]`. Hence:
//!
//! - a request that sets `PATH` with an empty or relative entry is refused
//!   ([`check_request_path`]);
//! - from any other `PATH` (the host's own, the operator's `extra_env`) such
//!   entries are dropped before the command runs, and a `PATH` left with none
//!   is [`DEFAULT_PATH`] (an empty `PATH` is the working directory to the
//!   shell) ([`clean_path`]; the host says so once, at start:
//!   [`dropped_entries`]);
//! - [`Program::of`] resolves the first word of a simple command against the
//!   working directory and the cleaned `PATH`, as `sh -c` does: a word with a
//!   `/` is a path (relative to the cwd), a shell builtin or keyword is not a
//!   program at all, any other word is looked up in each `PATH` directory in
//!   order, the first regular file with an execute bit winning. The result is
//!   the canonical path (symbolic links resolved).
//!
//! Only `stat`, `lstat` and `readlink` touch the file system here (no file is
//! opened), so a FIFO or a device in the workspace cannot make it block.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::SessionError;

/// `PATH` given to a command when neither the host nor the request has one.
pub(crate) const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Words `sh -c` and `bash -c` run themselves instead of looking up a program:
/// the reserved words and the builtins of bash and dash.
const SHELL_OWN_WORDS: &[&str] = &[
    "!",
    "{",
    "}",
    "[[",
    "]]",
    "case",
    "coproc",
    "do",
    "done",
    "elif",
    "else",
    "esac",
    "fi",
    "for",
    "function",
    "if",
    "in",
    "select",
    "then",
    "time",
    "until",
    "while",
    ".",
    ":",
    "[",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
];

/// The program a command's first word names ([`Program::of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// The word as written (`ls`, `./run.sh`, `/usr/bin/env`).
    pub word: String,
    /// Where the shell will find it: the canonical path of the file it will
    /// execute; `None` when no file matches (the shell will say `not found`).
    pub path: Option<PathBuf>,
}

impl Program {
    /// The program `command`'s first word names, when that word is a plain
    /// program word of a simple command: nothing but letters, digits and
    /// `_ - . / + @ , :`, not an assignment, a redirection, a quoted or
    /// expanded word, a shell keyword or a builtin. `None` otherwise (the
    /// shell decides at run time, or runs the word itself).
    ///
    /// A word with a `/` is resolved against `cwd`; any other word is
    /// searched in `path` (a cleaned `PATH`, [`clean_path`]).
    pub fn of(command: &str, cwd: &Path, path: &OsStr) -> Option<Program> {
        let word = first_word(command)?;
        let found = if word.contains('/') {
            // `sub/./x` is `sub/x` even when there is no such file yet.
            let p: PathBuf = cwd.join(word).components().collect();
            Some(std::fs::canonicalize(&p).unwrap_or(p))
        } else {
            search(word, path)
        };
        Some(Program {
            word: word.to_string(),
            path: found,
        })
    }

    /// True when the word names the program by path (`./x`, `/usr/bin/x`),
    /// false for a name looked up on `PATH`.
    pub fn by_path(&self) -> bool {
        self.word.contains('/')
    }
}

/// The first word of `command` when it is a plain program word (see
/// [`Program::of`]).
fn first_word(command: &str) -> Option<&str> {
    let rest = command.trim_start_matches([' ', '\t', '\n']);
    let end = rest
        .find([' ', '\t', '\n', ';', '&', '|', '<', '>', '(', ')'])
        .unwrap_or(rest.len());
    let word = &rest[..end];
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./+@,:".contains(&b));
    (plain && !SHELL_OWN_WORDS.contains(&word)).then_some(word)
}

/// The first executable regular file named `name` in `path`'s directories.
fn search(name: &str, path: &OsStr) -> Option<PathBuf> {
    path.as_bytes()
        .split(|&b| b == b':')
        .map(|dir| Path::new(OsStr::from_bytes(dir)).join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .map(|found| std::fs::canonicalize(&found).unwrap_or(found))
}

/// The entries of `path` the shell would search relative to the working
/// directory: empty ones (a leading, trailing or doubled `:`) and relative
/// ones (`.`, `bin`), as written.
pub fn dropped_entries(path: &OsStr) -> Vec<String> {
    path.as_bytes()
        .split(|&b| b == b':')
        .filter(|dir| !dir.starts_with(b"/"))
        .map(|dir| String::from_utf8_lossy(dir).into_owned())
        .collect()
}

/// `path` without its empty and relative entries ([`dropped_entries`]); when
/// none is left, [`DEFAULT_PATH`] (an empty `PATH` would make the shell search
/// the working directory again).
pub fn clean_path(path: &OsStr) -> OsString {
    let kept: Vec<&[u8]> = path
        .as_bytes()
        .split(|&b| b == b':')
        .filter(|dir| dir.starts_with(b"/"))
        .collect();
    if kept.is_empty() {
        return DEFAULT_PATH.into();
    }
    OsString::from_vec(kept.join(&b':'))
}

/// Refuses a request's own `PATH` when it has an empty or relative entry.
///
/// Errors: [`SessionError::InvalidRequest`] naming the entries.
pub(crate) fn check_request_path(env: &[(String, String)]) -> Result<(), SessionError> {
    for (name, value) in env.iter().filter(|(k, _)| k == "PATH") {
        let bad = dropped_entries(OsStr::new(value));
        if !bad.is_empty() {
            let shown: Vec<String> = bad.iter().map(|e| format!("`{e}`")).collect();
            return Err(SessionError::InvalidRequest(format!(
                "{name} has empty or relative entries ({}), which make the shell search the \
                 working directory for programs; give absolute directories only",
                shown.join(", ")
            )));
        }
    }
    Ok(())
}

/// The `PATH` a command runs with, cleaned ([`clean_path`]): the request's,
/// else the operator's (`extra`), else the host's, else [`DEFAULT_PATH`];
/// the last pair of a name wins, as in the environment it gets.
pub(crate) fn command_path(extra: &[(String, String)], request: &[(String, String)]) -> OsString {
    let given = request
        .iter()
        .chain(extra)
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| OsString::from(v));
    let path = given
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_else(|| DEFAULT_PATH.into());
    clean_path(&path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_words() {
        for (command, word) in [
            ("ls -l", Some("ls")),
            ("  ./run.sh", Some("./run.sh")),
            ("ls;rm x", Some("ls")),
            ("/usr/bin/env x", Some("/usr/bin/env")),
            ("git-lfs|x", Some("git-lfs")),
            ("FOO=1 ls", None),
            ("'ls'", None),
            ("$X", None),
            ("echo hi", None),
            ("cd /", None),
            ("if true; then ls; fi", None),
            (">out ls", None),
            ("", None),
        ] {
            assert_eq!(first_word(command), word, "{command:?}");
        }
    }

    #[test]
    fn empty_and_relative_entries_are_dropped() {
        for (path, clean, dropped) in [
            (":/usr/bin", "/usr/bin", vec![""]),
            (".", DEFAULT_PATH, vec!["."]),
            ("", DEFAULT_PATH, vec![""]),
            ("/bin::bin:/usr/bin:", "/bin:/usr/bin", vec!["", "bin", ""]),
            ("/usr/bin:/bin", "/usr/bin:/bin", vec![]),
        ] {
            assert_eq!(clean_path(OsStr::new(path)), OsStr::new(clean), "{path:?}");
            assert_eq!(dropped_entries(OsStr::new(path)), dropped, "{path:?}");
        }
    }

    #[test]
    fn a_request_path_with_a_relative_entry_is_refused() {
        let env = |v: &str| vec![("PATH".to_string(), v.to_string())];
        assert!(check_request_path(&env("/usr/bin:/bin")).is_ok());
        let err = check_request_path(&env(".:/usr/bin")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid request: PATH has empty or relative entries (`.`), which make the \
             shell search the working directory for programs; give absolute directories only"
        );
    }

    #[test]
    fn programs_are_found_as_the_shell_finds_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let bin = root.join("bin");
        std::fs::create_dir(&bin).unwrap();
        let tool = bin.join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::write(bin.join("data"), "").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = OsString::from(format!("/nonexistent:{}", bin.display()));
        let found = Program::of("tool --x", &root, &path).unwrap();
        assert_eq!(found.path.as_deref(), Some(tool.as_path()));
        assert!(!found.by_path());
        // Not executable: not a match.
        assert_eq!(Program::of("data", &root, &path).unwrap().path, None);
        let relative = Program::of("./bin/tool", &root, &path).unwrap();
        assert_eq!(relative.path.as_deref(), Some(tool.as_path()));
        assert!(relative.by_path());
        assert_eq!(Program::of("true", &root, &path), None);
    }
}
