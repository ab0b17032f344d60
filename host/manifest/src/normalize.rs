//! Reading a manifest: the TOML ([`Raw`](crate::schema::Raw)) validated into a
//! [`Manifest`] ([`Manifest::load`], [`Manifest::parse`]): the id, the contract
//! version, the exec grant and its `exec_env`/`exec_shells`/`exec_stdin` entries,
//! preopens (opened here, once), env values, sizes and durations. Every refusal is a
//! [`ManifestError`] naming the file and the field.

use std::path::Path;
use std::time::Duration;

use toolhost_process::HeldDir;

use crate::contract_version::{ContractVersion, UnsupportedContract};
use crate::error::{ManifestError, ValueError};
use crate::exec::{
    validate_exec_env, validate_exec_pattern, validate_exec_shell, validate_exec_stdin,
};
use crate::limits::Limits;
use crate::schema::{ExecGrant, Manifest, Preopen, Raw, RawEnv, RawExec};

/// Largest `memory` a manifest may ask for (4 GiB: all a wasm32 memory can hold).
pub const MAX_MEMORY: u64 = 4 << 30;
/// Smallest `memory` a manifest may ask for (1 MiB; a Rust guest needs about that to start).
pub const MIN_MEMORY: u64 = 1 << 20;
/// Longest `cpu` or `wall` a manifest may ask for (24 h).
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

impl Manifest {
    /// Reads and validates the manifest at `path`. Relative preopen paths are
    /// resolved against the manifest's directory.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Manifest::parse(&text, path, base, &|k| std::env::var(k).ok())
    }

    /// Validates manifest `text`. `path` names the file in errors; `base` is
    /// the directory relative preopen paths resolve against; `host_env` looks
    /// up host environment values for `env` keys granted with `true`.
    ///
    /// Errors: [`ManifestError::Parse`] (syntax, unknown keys, wrong types;
    /// with line and column) or [`ManifestError::Invalid`] (bad id, contract,
    /// sha256, units, exec pattern, env name, or a preopen that does not
    /// exist or is not a directory).
    pub fn parse(
        text: &str,
        path: &Path,
        base: &Path,
        host_env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Manifest, ManifestError> {
        let raw: Raw = toml::from_str(text).map_err(|e| ManifestError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let invalid = |field: &str, message: String| ManifestError::Invalid {
            path: path.to_path_buf(),
            field: field.to_string(),
            message,
        };
        // A value's own rule broken: its text is the message.
        let broken = |field: &str, e: ValueError| invalid(field, e.to_string());
        validate_id(&raw.id).map_err(|e| broken("id", e))?;
        let contract: ContractVersion = raw
            .contract
            .parse()
            .map_err(|e: UnsupportedContract| invalid("contract", e.to_string()))?;
        // `client` (elicitation, sampling) came with contract 0.2.0: a 0.1.0
        // plugin cannot call it, so a grant for one is a mistake worth naming.
        for (key, granted) in [("elicitation", raw.elicitation), ("sampling", raw.sampling)] {
            if granted && contract < ContractVersion::V0_2_0 {
                return Err(invalid(
                    key,
                    format!(
                        "needs contract {} or later (a {contract} plugin cannot ask the client); \
                         set `contract = \"{}\"` for a plugin built for it",
                        ContractVersion::V0_2_0,
                        ContractVersion::V0_2_0
                    ),
                ));
            }
        }
        let sha256 = match raw.sha256 {
            Some(s) => {
                let s = s.to_ascii_lowercase();
                if s.len() != 64 || !s.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(invalid("sha256", "expected 64 hex digits".into()));
                }
                Some(s)
            }
            None => None,
        };
        let exec = match raw.exec {
            None | Some(RawExec::Flag(false)) => ExecGrant::None,
            Some(RawExec::Flag(true)) => {
                return Err(invalid(
                    "exec",
                    "`true` is not a grant; list patterns (e.g. [\"git status\"]), or [\"**\"] \
                     for every command"
                        .into(),
                ));
            }
            Some(RawExec::Patterns(patterns)) => {
                for p in &patterns {
                    validate_exec_pattern(p).map_err(|e| broken("exec", e))?;
                }
                ExecGrant::Patterns(patterns)
            }
        };
        for (key, list) in [
            ("exec_env", &raw.exec_env),
            ("exec_shells", &raw.exec_shells),
            ("exec_stdin", &raw.exec_stdin),
        ] {
            if list.is_some() && exec == ExecGrant::None {
                return Err(broken(key, ValueError::WithoutExec));
            }
        }
        let exec_env = raw.exec_env.unwrap_or_default();
        for name in &exec_env {
            validate_exec_env(name).map_err(|e| broken("exec_env", e))?;
        }
        let exec_shells = raw.exec_shells.unwrap_or_default();
        for shell in &exec_shells {
            validate_exec_shell(shell).map_err(|e| broken("exec_shells", e))?;
        }
        let exec_stdin = raw.exec_stdin.unwrap_or_default();
        for pattern in &exec_stdin {
            validate_exec_stdin(pattern, &exec).map_err(|e| broken("exec_stdin", e))?;
        }
        let mut preopens = Vec::new();
        for (i, p) in raw.preopen.into_iter().enumerate() {
            let field = format!("preopen[{i}]");
            let host = base.join(&p.host);
            // One open: what is validated here is what every call is granted.
            let dir = HeldDir::open(&host).map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotADirectory {
                    invalid(
                        &format!("{field}.host"),
                        format!("{} is not a directory", host.display()),
                    )
                } else {
                    invalid(&format!("{field}.host"), format!("{}: {e}", host.display()))
                }
            })?;
            if !p.guest.starts_with('/') || p.guest.contains('\0') {
                return Err(invalid(
                    &format!("{field}.guest"),
                    format!("`{}` must be an absolute guest path like /data", p.guest),
                ));
            }
            preopens.push(Preopen {
                host: dir.path().to_path_buf(),
                dir,
                guest: p.guest,
                mode: p.mode,
            });
        }
        let mut env = Vec::new();
        for (key, value) in raw.env {
            if key.is_empty() || key.contains(['=', '\0']) {
                return Err(invalid(
                    "env",
                    format!("`{key}` is not a valid variable name"),
                ));
            }
            match value {
                RawEnv::FromHost(true) => {
                    if let Some(v) = host_env(&key) {
                        env.push((key, v));
                    } else {
                        tracing::debug!(
                            "manifest {}: env {key} is granted from the host, which has none",
                            path.display()
                        );
                    }
                }
                RawEnv::FromHost(false) => {
                    return Err(invalid(
                        &format!("env.{key}"),
                        "use `true` (the host's value) or a string (a literal); remove the key \
                         to grant nothing"
                            .into(),
                    ));
                }
                RawEnv::Literal(v) => {
                    if v.contains('\0') {
                        return Err(invalid(&format!("env.{key}"), "contains NUL".into()));
                    }
                    env.push((key, v));
                }
            }
        }
        let mut limits = Limits::default();
        if let Some(m) = &raw.memory {
            let bytes = parse_size(m).map_err(|e| broken("memory", e))?;
            if !(MIN_MEMORY..=MAX_MEMORY).contains(&bytes) {
                return Err(invalid(
                    "memory",
                    format!("{m} is out of range (1MiB to 4GiB)"),
                ));
            }
            limits.memory_bytes = bytes as usize;
        }
        if let Some(c) = &raw.cpu {
            limits.cpu = parse_duration(c).map_err(|e| broken("cpu", e))?;
        }
        if let Some(w) = &raw.wall {
            limits.wall = parse_duration(w).map_err(|e| broken("wall", e))?;
        }
        Ok(Manifest {
            id: raw.id,
            contract,
            sha256,
            exec,
            exec_env,
            exec_shells,
            exec_stdin,
            preopens,
            env,
            limits,
            sandbox: raw.sandbox,
            network: raw.network,
            unix_sockets: raw.unix_sockets,
            elicitation: raw.elicitation,
            sampling: raw.sampling,
        })
    }
}

/// Checks a plugin id: 1 to 64 characters of `[a-z0-9_-]`, starting with a
/// letter, without `__` (reserved for `id__tool` prefixes).
pub fn validate_id(id: &str) -> Result<(), ValueError> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && !id.contains("__");
    if ok {
        Ok(())
    } else {
        Err(ValueError::Id(id.to_string()))
    }
}

/// Parses a size: an integer followed by `B`, `KiB`, `MiB` or `GiB`
/// (e.g. `64MiB`; spaces allowed before the unit).
pub fn parse_size(s: &str) -> Result<u64, ValueError> {
    let (n, unit) = split_number(s)?;
    let mult: u64 = match unit {
        "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return Err(ValueError::SizeUnit(s.to_string())),
    };
    n.checked_mul(mult)
        .ok_or_else(|| ValueError::SizeTooLarge(s.to_string()))
}

/// Parses a duration: an integer followed by `ms`, `s`, `m`/`min` or `h`
/// (e.g. `500ms`, `2s`, `11min`). Zero and more than 24 h are refused.
pub fn parse_duration(s: &str) -> Result<Duration, ValueError> {
    let (n, unit) = split_number(s)?;
    let d = match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" | "min" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => return Err(ValueError::DurationUnit(s.to_string())),
    };
    if d.is_zero() || d > MAX_DURATION {
        return Err(ValueError::DurationRange(s.to_string()));
    }
    Ok(d)
}

fn split_number(s: &str) -> Result<(u64, &str), ValueError> {
    let s = s.trim();
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if end == 0 {
        return Err(ValueError::NotANumber(s.to_string()));
    }
    let n = s[..end]
        .parse::<u64>()
        .map_err(|error| ValueError::Number {
            text: s.to_string(),
            error,
        })?;
    Ok((n, s[end..].trim_start()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::PreopenMode;
    use toolhost_process::SandboxMode;

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1 GiB"), Ok(1 << 30));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("4096B"), Ok(4096));
        assert!(parse_size("64").unwrap_err().to_string().contains("unit"));
        assert!(parse_size("64MB").unwrap_err().to_string().contains("unit"));
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("-1MiB").is_err());
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("11min"), Ok(Duration::from_secs(660)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("25h").is_err());
        assert!(parse_duration("2").is_err());
        assert!(parse_duration("2 weeks").is_err());
    }

    #[test]
    fn ids() {
        for ok in ["a", "notes", "my-plugin_2"] {
            assert!(validate_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", "A", "1x", "-x", "a__b", "a b", "a/b", &"a".repeat(65)] {
            assert!(validate_id(bad).is_err(), "{bad}");
        }
    }

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        let dir = std::env::temp_dir();
        Manifest::parse(text, Path::new("p.toml"), &dir, &|k| {
            (k == "HOSTVAR").then(|| "from-host".to_string())
        })
    }

    #[test]
    fn manifest_fields_and_defaults() {
        let m = parse("id = \"p\"\ncontract = \"0.1.0\"\n").unwrap();
        assert_eq!(m, Manifest::deny_all("p"));
        let m = parse(
            r#"
id = "p"
contract = "0.1.0"
sha256 = "AB00000000000000000000000000000000000000000000000000000000000000"
exec = ["git status", "cargo test **"]
exec_env = ["NOTES_MODE", "NOTES_*"]
exec_shells = ["/bin/bash"]
memory = "128MiB"
cpu = "500ms"
wall = "2s"
sandbox = "read-only"
network = true
[env]
HOSTVAR = true
MISSING = true
LIT = "x"
[[preopen]]
host = "."
guest = "/data"
mode = "read-write"
"#,
        )
        .unwrap();
        assert_eq!(m.sha256.as_deref().unwrap()[..2], *"ab");
        assert_eq!(
            m.exec,
            ExecGrant::Patterns(vec!["git status".into(), "cargo test **".into()])
        );
        assert_eq!(m.exec_env, ["NOTES_MODE", "NOTES_*"]);
        assert_eq!(m.exec_shells, ["/bin/bash"]);
        assert_eq!(m.limits.memory_bytes, 128 << 20);
        assert_eq!(m.limits.cpu, Duration::from_millis(500));
        assert_eq!(m.limits.wall, Duration::from_secs(2));
        assert_eq!(m.sandbox, Some(SandboxMode::ReadOnly));
        assert!(m.network);
        assert_eq!(
            m.env,
            vec![
                ("HOSTVAR".to_string(), "from-host".to_string()),
                ("LIT".to_string(), "x".to_string())
            ]
        );
        assert_eq!(m.preopens.len(), 1);
        assert_eq!(m.preopens[0].mode, PreopenMode::ReadWrite);
        assert_eq!(
            parse("id=\"p\"\ncontract=\"0.1.0\"\nexec=false\n")
                .unwrap()
                .exec,
            ExecGrant::None
        );
    }

    #[test]
    fn manifest_errors_are_specific() {
        let err = |text: &str| parse(text).unwrap_err().to_string();
        let e = err("id = \"p\"\ncontract = \"0.1.0\"\nexce = [\"ls\"]\n");
        assert!(
            e.contains("line 3") && e.contains("unknown field `exce`"),
            "{e}"
        );
        let e = err(
            "id = \"p\"\ncontract = \"0.1.0\"\n[[preopen]]\nhost=\".\"\nguest=\"/d\"\nmode=\"rw\"\n",
        );
        assert!(e.contains("line 6"), "{e}");
        assert!(err("contract = \"0.1.0\"\n").contains("missing field `id`"));
        assert!(err("id = \"P\"\ncontract = \"0.1.0\"\n").contains("`id`"));
        assert!(err("id = \"p\"\ncontract = \"0.9.0\"\n").contains("not supported"));
        assert!(
            err("id = \"p\"\ncontract = \"0.1.0\"\nelicitation = true\n")
                .contains("`elicitation`: needs contract 0.2.0")
        );
        assert!(
            err("id = \"p\"\ncontract = \"0.1.0\"\nsampling = true\n")
                .contains("`sampling`: needs contract 0.2.0")
        );
        let m = parse("id = \"p\"\ncontract = \"0.2.0\"\nelicitation = true\nsampling = true\n")
            .unwrap();
        assert!(m.elicitation && m.sampling);
        let m = parse("id = \"p\"\ncontract = \"0.2.0\"\n").unwrap();
        assert!(!m.elicitation && !m.sampling);
        assert!(err("id = \"p\"\ncontract = \"0.1.0\"\nsha256 = \"xyz\"\n").contains("64 hex"));
        assert!(err("id = \"p\"\ncontract = \"0.1.0\"\nexec = true\n").contains("`exec`"));
        assert!(
            err("id = \"p\"\ncontract = \"0.1.0\"\nexec = [\"a;b\"]\n").contains("metacharacter")
        );
        assert!(err("id = \"p\"\ncontract = \"0.1.0\"\nmemory = \"64\"\n").contains("`memory`"));
        assert!(
            err("id = \"p\"\ncontract = \"0.1.0\"\nmemory = \"8GiB\"\n").contains("out of range")
        );
        assert!(err("id = \"p\"\ncontract = \"0.1.0\"\ncpu = \"1y\"\n").contains("`cpu`"));
        assert!(err("id = \"p\"\ncontract = \"0.1.0\"\nwall = \"0s\"\n").contains("`wall`"));
        assert!(err("id = \"p\"\ncontract = \"0.1.0\"\nsandbox = \"open\"\n").contains("line 3"));
        let e = err(
            "id = \"p\"\ncontract = \"0.1.0\"\n[[preopen]]\nhost=\"no/such/dir\"\nguest=\"/d\"\nmode=\"read-only\"\n",
        );
        assert!(e.contains("preopen[0].host"), "{e}");
        let e = err(
            "id = \"p\"\ncontract = \"0.1.0\"\n[[preopen]]\nhost=\".\"\nguest=\"d\"\nmode=\"read-only\"\n",
        );
        assert!(e.contains("preopen[0].guest"), "{e}");
        assert!(err("id = \"p\"\ncontract = \"0.1.0\"\n[env]\nX = false\n").contains("env.X"));
        let e = err("id = \"p\"\ncontract = \"0.1.0\"\nexec_env = [\"A\"]\n");
        assert!(
            e.contains("`exec_env`") && e.contains("without an `exec` grant"),
            "{e}"
        );
        let e = err("id = \"p\"\ncontract = \"0.1.0\"\nexec = [\"ls\"]\nexec_env = [\"*\"]\n");
        assert!(e.contains("`exec_env`"), "{e}");
        let e =
            err("id = \"p\"\ncontract = \"0.1.0\"\nexec = [\"ls\"]\nexec_shells = [\"bash\"]\n");
        assert!(e.contains("`exec_shells`") && e.contains("absolute"), "{e}");
    }

    #[test]
    fn exec_stdin_in_the_manifest_file() {
        let m = parse(
            "id = \"p\"\ncontract = \"0.1.0\"\nexec = [\"wc -l\", \"jq *\"]\n\
             exec_stdin = [\"wc -l\", \"jq *\"]\n",
        )
        .unwrap();
        assert_eq!(m.exec_stdin, ["wc -l", "jq *"]);
        assert_eq!(
            m.to_json()["exec_stdin"],
            serde_json::json!(["wc -l", "jq *"])
        );
        let err = |text: &str| parse(text).unwrap_err().to_string();
        let e = err("id = \"p\"\ncontract = \"0.1.0\"\nexec_stdin = [\"wc -l\"]\n");
        assert!(
            e.contains("`exec_stdin`") && e.contains("without an `exec` grant"),
            "{e}"
        );
        let e =
            err("id = \"p\"\ncontract = \"0.1.0\"\nexec = [\"wc -l\"]\nexec_stdin = [\"wc *\"]\n");
        assert!(
            e.contains("`exec_stdin`") && e.contains("not covered"),
            "{e}"
        );
        let e = err("id = \"p\"\ncontract = \"0.1.0\"\nexec = [\"sh\"]\nexec_stdin = [\"sh\"]\n");
        assert!(
            e.contains("`exec_stdin`") && e.contains("runs what it reads"),
            "{e}"
        );
        let e = err("id = \"p\"\ncontract = \"0.1.0\"\nexec = [\"ls\"]\nexec_stdin = [\"a;b\"]\n");
        assert!(
            e.contains("`exec_stdin`") && e.contains("metacharacter"),
            "{e}"
        );
        assert!(
            err("id = \"p\"\ncontract = \"0.1.0\"\nexec = [\"ls\"]\nexec_stdin = \"ls\"\n")
                .contains("exec_stdin")
        );
    }
}
