//! The shell a command runs under: the kinds of shell, the one list of shells the host
//! looks for, which shell a request asks for, and how it is resolved.
//!
//! The engine resolves the host's shell once, when it starts ([`Shell::find`] over
//! [`BASH_CANDIDATES`], kept as [`Sessions::shell`]), so a request for it
//! ([`ShellRequest::Host`]) costs no file system check and says which kind of shell it
//! got ([`ResolvedStart::shell_kind`]). A request for `/bin/sh` or for a path, as
//! contract 0.1.0 and 0.2.0 plugins make, is checked at every start, as it always was;
//! the runtime tells tool plugins the host's shell (`TOOLHOST_SHELL` in their
//! environment), so a plugin asks for it by path in one start, never by trying
//! shells in turn.

use std::io;
use std::path::{Path, PathBuf};

use nix::unistd::{self, AccessFlags};
use serde::{Deserialize, Serialize};

use crate::SessionError;
#[cfg(doc)]
use crate::{ResolvedStart, Sessions, StartRequest};

/// Where the host looks for bash, in order: the first that is an executable regular
/// file is the host's shell ([`Sessions::shell`]). The only list of shells: the
/// runtime names the host's shell to tool plugins in their environment
/// (`TOOLHOST_SHELL`), and the built-in `bash` plugin starts its commands under it.
pub const BASH_CANDIDATES: [&str; 3] = ["/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash"];

/// The shell a request that names none runs under (contract 0.1.0 and 0.2.0 `shell:
/// none`, [`ShellRequest::Default`]), and the host's shell where no bash of
/// [`BASH_CANDIDATES`] exists: `/bin/sh`.
pub const DEFAULT_SHELL: &str = "/bin/sh";

/// What kind of shell runs a command (as Codex's `ShellType`), told by the shell's
/// file name: a bash started as `sh` runs in POSIX mode, so the name, not the file it
/// leads to, says how it behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShellKind {
    /// GNU bash (file name `bash`).
    Bash,
    /// A POSIX `sh` (file name `sh`), whichever program it is.
    Sh,
    /// Any other shell a request named (`dash`, `zsh`, ...).
    Other,
}

impl ShellKind {
    /// The kind of the shell at `path`, by its file name: `bash` is
    /// [`ShellKind::Bash`], `sh` is [`ShellKind::Sh`], anything else
    /// [`ShellKind::Other`].
    pub fn of(path: &Path) -> ShellKind {
        match path.file_name().and_then(|n| n.to_str()) {
            Some("bash") => ShellKind::Bash,
            Some("sh") => ShellKind::Sh,
            _ => ShellKind::Other,
        }
    }

    /// `bash`, `sh` or `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShellKind::Bash => "bash",
            ShellKind::Sh => "sh",
            ShellKind::Other => "other",
        }
    }
}

/// A shell resolved on the host: its absolute path and its kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shell {
    /// The shell's absolute path.
    pub path: PathBuf,
    /// What kind of shell it is ([`ShellKind::of`] its path).
    pub kind: ShellKind,
}

impl Shell {
    /// The first of `candidates` that [`resolve_shell`] accepts (an absolute path to an
    /// executable regular file), else [`DEFAULT_SHELL`], which is not checked: a host
    /// without it fails each start that asks for it, naming it. The engine calls this
    /// once, with [`BASH_CANDIDATES`].
    pub(crate) fn find(candidates: &[&str]) -> Shell {
        let path = candidates
            .iter()
            .find_map(|c| resolve_shell(Some(c)).ok())
            .unwrap_or_else(|| PathBuf::from(DEFAULT_SHELL));
        Shell {
            kind: ShellKind::of(&path),
            path,
        }
    }
}

/// Which shell a [`StartRequest`] runs its command under (`SHELL -c COMMAND`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShellRequest {
    /// [`DEFAULT_SHELL`] (`/bin/sh`), checked at every start: what a contract 0.1.0 or
    /// 0.2.0 request without a `shell` gets. The default.
    #[default]
    Default,
    /// The host's shell ([`Sessions::shell`]): the first bash of [`BASH_CANDIDATES`] the
    /// host has, else `/bin/sh`, resolved once when the engine started.
    Host,
    /// This shell (a contract 0.1.0 or 0.2.0 `shell`), checked at every start: an
    /// absolute path to an executable regular file, at most
    /// [`MAX_SHELL_BYTES`](crate::MAX_SHELL_BYTES) long.
    Path(String),
}

impl From<Option<String>> for ShellRequest {
    /// The contract 0.1.0 and 0.2.0 `shell` field: `none` is
    /// [`ShellRequest::Default`], a path is [`ShellRequest::Path`].
    fn from(shell: Option<String>) -> ShellRequest {
        shell.map_or(ShellRequest::Default, ShellRequest::Path)
    }
}

/// Resolves a named shell: `None` is [`DEFAULT_SHELL`]; otherwise an absolute path to
/// an executable regular file.
///
/// Errors: [`SessionError::InvalidRequest`], whose text starts with `` shell `PATH` ``
/// and says which rule the path broke.
pub(crate) fn resolve_shell(shell: Option<&str>) -> Result<PathBuf, SessionError> {
    let shell = shell.unwrap_or(DEFAULT_SHELL);
    let invalid = |why: &str| SessionError::InvalidRequest(format!("shell `{shell}` {why}"));
    if shell.contains('\0') {
        return Err(invalid("contains a NUL byte"));
    }
    let path = PathBuf::from(shell);
    if !path.is_absolute() {
        return Err(invalid("is not an absolute path (e.g. /bin/bash)"));
    }
    let meta = std::fs::metadata(&path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => invalid("does not exist"),
        _ => invalid(&format!("cannot be inspected: {e}")),
    })?;
    if !meta.is_file() {
        return Err(invalid("is not a regular file"));
    }
    if unistd::access(&path, AccessFlags::X_OK).is_err() {
        return Err(invalid("is not executable"));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn the_host_looks_for_bash_where_it_has_always_looked() {
        assert_eq!(
            BASH_CANDIDATES,
            ["/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash"]
        );
        assert_eq!(DEFAULT_SHELL, "/bin/sh");
        assert_eq!(ShellRequest::default(), ShellRequest::Default);
        assert_eq!(ShellRequest::from(None), ShellRequest::Default);
        assert_eq!(
            ShellRequest::from(Some("/bin/bash".to_owned())),
            ShellRequest::Path("/bin/bash".into())
        );
    }

    #[test]
    fn a_shell_kind_is_told_by_its_name() {
        for (path, kind) in [
            ("/bin/sh", ShellKind::Sh),
            ("/usr/bin/sh", ShellKind::Sh),
            ("/bin/bash", ShellKind::Bash),
            ("/usr/local/bin/bash", ShellKind::Bash),
            ("/bin/dash", ShellKind::Other),
            ("/usr/bin/zsh", ShellKind::Other),
            ("/opt/bash-5/bin/bash5", ShellKind::Other),
            ("/", ShellKind::Other),
        ] {
            assert_eq!(ShellKind::of(Path::new(path)), kind, "{path}");
        }
        assert_eq!(ShellKind::Bash.as_str(), "bash");
        assert_eq!(ShellKind::Sh.as_str(), "sh");
        assert_eq!(ShellKind::Other.as_str(), "other");
    }

    /// `Shell::find` takes the first candidate that is an executable file, skipping
    /// missing ones, directories and files without the execute bit, and falls back
    /// to `/bin/sh`.
    #[test]
    fn the_first_executable_candidate_is_the_hosts_shell() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, mode: u32| {
            let path = dir.path().join(name);
            std::fs::write(&path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            path.to_str().unwrap().to_owned()
        };
        let plain = file("bash", 0o644);
        let sub = dir.path().join("sub");
        std::fs::create_dir_all(sub.join("bash")).unwrap();
        let a_dir = sub.join("bash").to_str().unwrap().to_owned();
        let missing = dir.path().join("none/bash").to_str().unwrap().to_owned();
        std::fs::create_dir(dir.path().join("x")).unwrap();
        let runnable = dir.path().join("x/bash");
        std::fs::write(&runnable, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&runnable, std::fs::Permissions::from_mode(0o755)).unwrap();
        let runnable = runnable.to_str().unwrap().to_owned();

        let found = Shell::find(&[&missing, &plain, &a_dir, &runnable]);
        assert_eq!(found.path, PathBuf::from(&runnable));
        assert_eq!(found.kind, ShellKind::Bash);
        let none = Shell::find(&[&missing, &plain, &a_dir]);
        assert_eq!(none.path, PathBuf::from("/bin/sh"));
        assert_eq!(none.kind, ShellKind::Sh);
        if let Some(bash) = BASH_CANDIDATES
            .iter()
            .find(|c| resolve_shell(Some(c)).is_ok())
        {
            assert_eq!(Shell::find(&BASH_CANDIDATES).path, PathBuf::from(bash));
        }
    }

    #[test]
    fn a_named_shell_must_be_an_absolute_executable_file() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("sh");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        let plain = plain.to_str().unwrap().to_owned();
        let refusal = |shell: &str| match resolve_shell(Some(shell)) {
            Err(SessionError::InvalidRequest(m)) => m,
            other => panic!("{shell}: {other:?}"),
        };
        // Root too: access(X_OK) wants an execute bit on a regular file.
        assert_eq!(
            refusal(&plain),
            format!("shell `{plain}` is not executable")
        );
        assert_eq!(
            refusal("bin/sh"),
            "shell `bin/sh` is not an absolute path (e.g. /bin/bash)"
        );
        let missing = dir.path().join("missing");
        let missing = missing.to_str().unwrap();
        assert_eq!(
            refusal(missing),
            format!("shell `{missing}` does not exist")
        );
        let here = dir.path().to_str().unwrap();
        assert_eq!(
            refusal(here),
            format!("shell `{here}` is not a regular file")
        );
        assert_eq!(
            refusal("/bin/sh\0x"),
            "shell `/bin/sh\0x` contains a NUL byte"
        );
        assert_eq!(resolve_shell(None).unwrap(), PathBuf::from("/bin/sh"));
    }
}
