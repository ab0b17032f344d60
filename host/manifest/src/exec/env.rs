//! The environment a pattern grant lets a command get: the safe default names
//! ([`SAFE_EXEC_ENV`]) with plain values ([`check_safe_env_value`]), and the names
//! the manifest's `exec_env` grants ([`exec_env_granted`], [`validate_exec_env`]).

use crate::error::ValueError;

/// Environment names any plugin with an exec grant may set on the commands it
/// starts, without an `exec_env` grant: locale, time zone, colour and
/// terminal-size hints. No program runs code, loads a library or finds a
/// program through them; their values are checked ([`check_safe_env_value`])
/// unless `exec_env` grants the name. A trailing `*` is a prefix (`LC_*`).
pub const SAFE_EXEC_ENV: &[&str] = &[
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "COLUMNS",
    "LINES",
    "CI",
];

/// Does the name pattern `pattern` (an exact name, or a prefix ending in `*`)
/// cover the environment name `name`? Case-sensitive.
pub(crate) fn env_pattern_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// May a plugin whose manifest grants `exec_env = granted` set the
/// environment variable `name` on a command it starts (under a pattern grant
/// other than `**`)? Yes for [`SAFE_EXEC_ENV`] and for the names `granted`
/// covers, exactly or by a `PREFIX_*`. Pure; case-sensitive.
pub fn exec_env_granted(name: &str, granted: &[String]) -> bool {
    SAFE_EXEC_ENV
        .iter()
        .copied()
        .chain(granted.iter().map(String::as_str))
        .any(|p| env_pattern_matches(p, name))
}

/// Longest value a name of [`SAFE_EXEC_ENV`] may get without an `exec_env`
/// grant of it (bytes; `COLUMNS`/`LINES` and the colour hints are shorter).
pub const MAX_SAFE_ENV_VALUE: usize = 128;

/// Checks the value of a [`SAFE_EXEC_ENV`] name set without an `exec_env`
/// grant of that name. The names are safe; some values are not: glibc loads
/// a locale from an absolute path (`LC_ALL=/ws/loc`), and `TZ=/ws/f` makes a
/// program parse a file the plugin wrote. `Err` states the rule:
///
/// - `LANG`, `LC_*`: a locale name of `[A-Za-z0-9_.@-]` (`LANGUAGE`, a list:
///   also `:`), so no `/`, and no `..`; at most [`MAX_SAFE_ENV_VALUE`] bytes;
/// - `TZ`: a POSIX TZ string (`UTC0`, `EST5EDT,M3.2.0,M11.1.0`, `<+03>-3`) or a
///   zoneinfo name (`America/New_York`, `:Europe/Paris`): not starting with
///   `/` or `:/`, no `..` path component, no control character; at most
///   [`MAX_SAFE_ENV_VALUE`] bytes;
/// - `COLUMNS`, `LINES`: at most 5 decimal digits;
/// - `NO_COLOR`, `FORCE_COLOR`, `CLICOLOR`, `CI`: at most 16 bytes of
///   `[A-Za-z0-9_.-]` (`1`, `true`, `3`...).
///
/// Any other name: `Ok` (it is not in the safe set). Pure.
pub fn check_safe_env_value(name: &str, value: &str) -> Result<(), &'static str> {
    let plain = |extra: &str, max: usize| {
        value.len() <= max
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c) || extra.contains(c))
    };
    let (ok, rule) = match name {
        "LANGUAGE" => (
            plain("@:", MAX_SAFE_ENV_VALUE) && !value.contains(".."),
            "a list of locale names: `A-Z a-z 0-9 _ . @ -` and `:`, no `/` or `..`, at most \
             128 bytes (e.g. `en_US:en`)",
        ),
        n if n == "LANG" || n.starts_with("LC_") => (
            plain("@", MAX_SAFE_ENV_VALUE) && !value.contains(".."),
            "a locale name: `A-Z a-z 0-9 _ . @ -`, no `/` or `..`, at most 128 bytes (e.g. \
             `C.UTF-8`, `en_US.UTF-8`)",
        ),
        "TZ" => (
            value.len() <= MAX_SAFE_ENV_VALUE
                && !value.starts_with('/')
                && !value.starts_with(":/")
                && !value.chars().any(char::is_control)
                && !value.split(['/', ':']).any(|c| c == ".."),
            "a POSIX TZ string or zoneinfo name (e.g. `UTC0`, `America/New_York`): not a path \
             starting with `/` or `:/`, no `..` component, no control character, at most 128 \
             bytes",
        ),
        "COLUMNS" | "LINES" => (
            value.len() <= 5 && value.bytes().all(|b| b.is_ascii_digit()),
            "at most 5 decimal digits",
        ),
        "NO_COLOR" | "FORCE_COLOR" | "CLICOLOR" | "CI" => (
            plain("", 16),
            "at most 16 characters of `A-Z a-z 0-9 _ . -` (e.g. `1`, `true`)",
        ),
        _ => (true, ""),
    };
    if ok { Ok(()) } else { Err(rule) }
}

/// Checks an `exec_env` entry: an environment name of `[A-Za-z_][A-Za-z0-9_]*`,
/// optionally ending in `*` (a prefix). `*` alone is refused (that is
/// `exec = ["**"]`'s authority).
pub fn validate_exec_env(pattern: &str) -> Result<(), ValueError> {
    let name = pattern.strip_suffix('*').unwrap_or(pattern);
    let ok = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ValueError::EnvName(pattern.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (name, exec_env grant, allowed)
    const ENV_CASES: &[(&str, &[&str], bool)] = &[
        // the safe default set
        ("LANG", &[], true),
        ("LANGUAGE", &[], true),
        ("LC_ALL", &[], true),
        ("LC_CTYPE", &[], true),
        ("TZ", &[], true),
        ("NO_COLOR", &[], true),
        ("COLUMNS", &[], true),
        ("LINES", &[], true),
        ("CI", &[], true),
        // names that make bash, ld.so or common programs run code
        ("BASH_ENV", &[], false),
        ("ENV", &[], false),
        ("BASH_FUNC_sleep%%", &[], false),
        ("BASH_FUNC_sleep()", &[], false),
        ("LD_PRELOAD", &[], false),
        ("LD_LIBRARY_PATH", &[], false),
        ("LD_AUDIT", &[], false),
        ("PATH", &[], false),
        ("IFS", &[], false),
        ("PS4", &[], false),
        ("SHELLOPTS", &[], false),
        ("BASHOPTS", &[], false),
        ("PROMPT_COMMAND", &[], false),
        ("GLOBIGNORE", &[], false),
        ("CDPATH", &[], false),
        ("HOME", &[], false),
        ("PAGER", &[], false),
        ("EDITOR", &[], false),
        ("GIT_SSH_COMMAND", &[], false),
        ("GCONV_PATH", &[], false),
        ("GLIBC_TUNABLES", &[], false),
        ("PYTHONPATH", &[], false),
        ("NODE_OPTIONS", &[], false),
        ("TERM", &[], false),
        // case matters
        ("lang", &[], false),
        ("Lang", &[], false),
        ("LC", &[], false),
        // granted names: exact, or by prefix
        ("NOTES_MODE", &["NOTES_MODE"], true),
        ("NOTES_MODEX", &["NOTES_MODE"], false),
        ("NOTES_MOD", &["NOTES_MODE"], false),
        ("NOTES_X", &["NOTES_*"], true),
        ("NOTES_", &["NOTES_*"], true),
        ("NOTESX", &["NOTES_*"], false),
        ("BASH_ENV", &["NOTES_*"], false),
        ("LD_PRELOAD", &["LD_PRELOAD"], true),
    ];

    #[test]
    fn exec_env_table() {
        for (name, granted, expected) in ENV_CASES {
            let granted: Vec<String> = granted.iter().map(|g| g.to_string()).collect();
            assert_eq!(
                exec_env_granted(name, &granted),
                *expected,
                "{name:?} under exec_env = {granted:?}"
            );
        }
        for ok in ["A", "_X", "NOTES_MODE", "NOTES_*", "a1_*"] {
            assert!(validate_exec_env(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "*",
            "1X",
            "A-B",
            "A=B",
            "BASH_FUNC_f%%",
            "A*B",
            "A **",
            "A\0",
        ] {
            assert!(validate_exec_env(bad).is_err(), "{bad:?}");
        }
    }

    /// (name, value, allowed without an `exec_env` grant of the name)
    const ENV_VALUES: &[(&str, &str, bool)] = &[
        ("LANG", "C", true),
        ("LANG", "C.UTF-8", true),
        ("LANG", "en_US.UTF-8", true),
        ("LANG", "sr_RS@latin", true),
        ("LANG", "", true),
        ("LC_ALL", "C.UTF-8", true),
        ("LC_MESSAGES", "de_DE.utf8", true),
        ("LANGUAGE", "en_US:en", true),
        ("LANG", "/x", false),
        ("LC_ALL", "/tmp/x", false),
        ("LC_ALL", "/ws/loc", false),
        ("LC_CTYPE", "../../ws/loc", false),
        ("LC_CTYPE", "..", false),
        ("LC_ALL", "C/../x", false),
        ("LC_ALL", "C x", false),
        ("LC_ALL", "C:x", false),
        ("LC_ALL", "C\n", false),
        ("LANGUAGE", "en:/tmp/x", false),
        ("LANGUAGE", "en:..", false),
        ("TZ", "UTC", true),
        ("TZ", "UTC0", true),
        ("TZ", "EST5EDT,M3.2.0,M11.1.0", true),
        ("TZ", "<+0330>-3:30", true),
        ("TZ", "America/New_York", true),
        ("TZ", ":America/New_York", true),
        ("TZ", "Etc/GMT+5", true),
        ("TZ", "", true),
        ("TZ", "/ws/file", false),
        ("TZ", ":/ws/file", false),
        ("TZ", "../../ws/file", false),
        ("TZ", ":../ws/file", false),
        ("TZ", "America/../../../ws/f", false),
        ("TZ", "UTC\n", false),
        ("COLUMNS", "80", true),
        ("LINES", "24", true),
        ("COLUMNS", "", true),
        ("COLUMNS", "999999", false),
        ("COLUMNS", "80x", false),
        ("LINES", "-1", false),
        ("NO_COLOR", "1", true),
        ("FORCE_COLOR", "3", true),
        ("CLICOLOR", "0", true),
        ("CI", "true", true),
        ("CI", "/x", false),
        ("NO_COLOR", "$(id)", false),
        ("FORCE_COLOR", "12345678901234567", false),
        // names outside the safe set are judged by name, not here
        ("NOTES_MODE", "/anything", true),
    ];

    #[test]
    fn safe_env_values_table() {
        for (name, value, expected) in ENV_VALUES {
            assert_eq!(
                check_safe_env_value(name, value).is_ok(),
                *expected,
                "{name}={value:?}"
            );
        }
        assert!(check_safe_env_value("LANG", &"a".repeat(128)).is_ok());
        assert!(check_safe_env_value("LANG", &"a".repeat(129)).is_err());
        assert!(check_safe_env_value("TZ", &"a".repeat(129)).is_err());
    }
}
