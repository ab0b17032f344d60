//! Wrapper commands (`env`, `timeout`, `sudo`…) and shells that run a script
//! string (`bash -c`, `eval`): where the wrapped command starts.

use crate::pattern::Arg;

/// What peeling one wrapper layer gave.
#[derive(Debug)]
pub enum Peel {
    /// The program is not a wrapper.
    NotWrapper,
    /// A wrapper used in a way that runs no command (`env` alone prints the
    /// environment, `command -v x` looks `x` up); judge it as it stands.
    NoCommand,
    /// A wrapper whose wrapped command cannot be found statically (an
    /// unknown option, an option only known at run time).
    Unknown(String),
    /// The wrapped command.
    Inner {
        /// Its words, program first.
        inner: Vec<Arg>,
        /// Environment variables the wrapper sets for it (`env X=1 …`).
        env: Vec<String>,
        /// The wrapper runs it with other privileges (`sudo`, `doas`).
        privileged: bool,
        /// Reasons the command is at most asked about (`time -o FILE` writes).
        notes: Vec<String>,
    },
}

/// How a wrapper's options look.
struct Spec {
    name: &'static str,
    /// Short options without a value.
    flags: &'static str,
    /// Short options taking a value (attached or the next word).
    with_arg: &'static str,
    /// Short options taking an optional value, attached only (`xargs -i[R]`).
    attached: &'static str,
    /// Long options without a value (`--x=v` is still accepted for these).
    long_flags: &'static [&'static str],
    /// Long options taking a value (`--x=v` or `--x v`).
    long_with_arg: &'static [&'static str],
    /// Options (short or long) after which there is no command to run.
    no_command: &'static [&'static str],
    /// Options (short or long) whose effect this plugin does not follow.
    unknown: &'static [&'static str],
    /// Options (short or long) that make the command at most ask, with why.
    notes: &'static [(&'static str, &'static str)],
    /// Positional words before the command (`timeout DURATION`).
    positional: usize,
    /// `NAME=VALUE` words may precede the command.
    assignments: bool,
    /// Numeric options like `nice -5`.
    numeric: bool,
    /// The wrapper feeds unknown extra arguments (`xargs`), and runs `echo`
    /// when no command is given.
    appends_input: bool,
    privileged: bool,
}

const BASE: Spec = Spec {
    name: "",
    flags: "",
    with_arg: "",
    attached: "",
    long_flags: &[],
    long_with_arg: &[],
    no_command: &[],
    unknown: &[],
    notes: &[],
    positional: 0,
    assignments: false,
    numeric: false,
    appends_input: false,
    privileged: false,
};

const SPECS: &[Spec] = &[
    Spec {
        name: "env",
        flags: "i0v",
        with_arg: "uCS",
        long_flags: &[
            "ignore-environment",
            "null",
            "debug",
            "block-signal",
            "default-signal",
            "ignore-signal",
            "list-signal-handling",
        ],
        long_with_arg: &["unset", "chdir", "split-string"],
        unknown: &["S", "split-string"],
        assignments: true,
        ..BASE
    },
    Spec {
        name: "timeout",
        flags: "v",
        with_arg: "sk",
        long_flags: &["preserve-status", "foreground", "verbose"],
        long_with_arg: &["signal", "kill-after"],
        positional: 1,
        ..BASE
    },
    Spec {
        name: "time",
        flags: "pvaq",
        with_arg: "fo",
        long_flags: &["portability", "verbose", "append", "quiet"],
        long_with_arg: &["format", "output"],
        notes: &[
            ("o", "`time -o` writes a file"),
            ("output", "`time --output` writes a file"),
        ],
        ..BASE
    },
    Spec {
        name: "nice",
        with_arg: "n",
        long_with_arg: &["adjustment"],
        numeric: true,
        ..BASE
    },
    Spec {
        name: "nohup",
        ..BASE
    },
    Spec {
        name: "stdbuf",
        with_arg: "ioe",
        long_with_arg: &["input", "output", "error"],
        ..BASE
    },
    Spec {
        name: "xargs",
        flags: "0oprtx",
        with_arg: "adEILnPs",
        attached: "eil",
        long_flags: &[
            "null",
            "open-tty",
            "interactive",
            "no-run-if-empty",
            "verbose",
            "exit",
        ],
        long_with_arg: &[
            "arg-file",
            "delimiter",
            "max-lines",
            "max-args",
            "max-procs",
            "max-chars",
            "process-slot-var",
            "replace",
            "eof",
        ],
        appends_input: true,
        ..BASE
    },
    Spec {
        name: "sudo",
        flags: "AbEHiKklnPSsVvBR",
        with_arg: "ugCDhprtTU",
        long_flags: &[
            "askpass",
            "background",
            "preserve-env",
            "set-home",
            "login",
            "remove-timestamp",
            "reset-timestamp",
            "list",
            "non-interactive",
            "preserve-groups",
            "stdin",
            "shell",
            "validate",
            "version",
            "bell",
            "edit",
            "help",
        ],
        long_with_arg: &[
            "user",
            "group",
            "close-from",
            "chdir",
            "host",
            "prompt",
            "role",
            "type",
            "command-timeout",
            "other-user",
        ],
        no_command: &[
            "e", "edit", "l", "list", "v", "validate", "V", "version", "K", "help",
        ],
        assignments: true,
        privileged: true,
        ..BASE
    },
    Spec {
        name: "doas",
        flags: "ns",
        with_arg: "uC",
        no_command: &["C"],
        privileged: true,
        ..BASE
    },
    Spec {
        name: "setsid",
        flags: "cfw",
        long_flags: &["ctty", "fork", "wait"],
        ..BASE
    },
    Spec {
        name: "command",
        flags: "pvV",
        no_command: &["v", "V"],
        ..BASE
    },
    Spec {
        name: "exec",
        flags: "cl",
        with_arg: "a",
        ..BASE
    },
    Spec {
        name: "builtin",
        ..BASE
    },
];

/// Peels one wrapper layer: `base` is the program's basename, `args` the
/// words after it.
pub fn peel(base: &str, args: &[Arg]) -> Peel {
    let Some(spec) = SPECS.iter().find(|s| s.name == base) else {
        return Peel::NotWrapper;
    };
    let mut notes = Vec::new();
    let mut i = 0;
    // Options.
    while let Some(a) = args.get(i) {
        if !a.resolved {
            return Peel::Unknown(format!(
                "`{base}` gets the word `{}`, only known at run time, where its options or command go",
                a.text
            ));
        }
        let t = a.text.as_str();
        if t == "--" {
            i += 1;
            break;
        }
        if base == "env" && t == "-" {
            i += 1;
            continue;
        }
        if !t.starts_with('-') || t == "-" {
            break;
        }
        if spec.numeric && t[1..].chars().all(|c| c.is_ascii_digit()) {
            i += 1;
            continue;
        }
        let opt_check = |o: &str, notes: &mut Vec<String>| -> Option<Peel> {
            if spec.no_command.contains(&o) {
                return Some(Peel::NoCommand);
            }
            if spec.unknown.contains(&o) {
                return Some(Peel::Unknown(format!(
                    "`{base}` option `{o}` is not followed by this policy"
                )));
            }
            if let Some((_, why)) = spec.notes.iter().find(|(n, _)| *n == o) {
                notes.push((*why).to_string());
            }
            None
        };
        if let Some(long) = t.strip_prefix("--") {
            let (name, has_value) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            if let Some(p) = opt_check(name, &mut notes) {
                return p;
            }
            if spec.long_flags.contains(&name) {
                i += 1;
            } else if spec.long_with_arg.contains(&name) {
                i += if has_value { 1 } else { 2 };
            } else {
                return Peel::Unknown(format!(
                    "`{base}` option `--{name}` is not known to this policy"
                ));
            }
            continue;
        }
        // A group of short options.
        let chars: Vec<char> = t[1..].chars().collect();
        let mut j = 0;
        let mut consumed_next = false;
        while j < chars.len() {
            let c = chars[j];
            let o = c.to_string();
            if let Some(p) = opt_check(&o, &mut notes) {
                return p;
            }
            if spec.flags.contains(c) {
                j += 1;
            } else if spec.attached.contains(c) {
                break;
            } else if spec.with_arg.contains(c) {
                if j + 1 == chars.len() {
                    consumed_next = true;
                }
                break;
            } else {
                return Peel::Unknown(format!(
                    "`{base}` option `-{c}` is not known to this policy"
                ));
            }
        }
        i += if consumed_next { 2 } else { 1 };
    }
    if i > args.len() {
        // An option's value is missing: the wrapper fails without running anything.
        return Peel::NoCommand;
    }
    // Positional words (a duration) and NAME=VALUE assignments.
    let mut rest = &args[i.min(args.len())..];
    if rest.len() < spec.positional {
        return Peel::NoCommand;
    }
    rest = &rest[spec.positional..];
    let mut env = Vec::new();
    if spec.assignments {
        while let Some(a) = rest.first() {
            match a.text.split_once('=') {
                Some((n, _)) if a.resolved && is_name(n) => {
                    env.push(n.to_string());
                    rest = &rest[1..];
                }
                _ => break,
            }
        }
    }
    let mut inner: Vec<Arg> = rest.to_vec();
    if spec.appends_input {
        if inner.is_empty() {
            inner.push(Arg::literal("echo"));
        }
        inner.push(Arg::unresolved(format!("(arguments read by {base})")));
    }
    if inner.is_empty() {
        return Peel::NoCommand;
    }
    Peel::Inner {
        inner,
        env,
        privileged: spec.privileged,
        notes,
    }
}

fn is_name(n: &str) -> bool {
    let mut chars = n.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Shells whose `-c STRING` is parsed and judged.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish"];

/// For a shell run with `-c STRING` or for `eval ARGS…`, the script text;
/// `Err` with a reason when it is only known at run time. `None` when the
/// command runs no script string (then it is judged as a plain program).
pub fn shell_script(base: &str, args: &[Arg]) -> Option<Result<String, String>> {
    if base == "eval" {
        if args.iter().any(|a| !a.resolved) {
            return Some(Err(
                "`eval` runs a string only known at run time".to_string()
            ));
        }
        let text: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
        return Some(Ok(text.join(" ")));
    }
    if !SHELLS.contains(&base) {
        return None;
    }
    let mut has_c = false;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if !a.resolved {
            return has_c.then(|| Err(format!("`{base}` gets an option only known at run time")));
        }
        let t = a.text.as_str();
        if t == "--" || t == "-" {
            i += 1;
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            i += if matches!(long, "rcfile" | "init-file") {
                2
            } else {
                1
            };
            if long == "command" {
                has_c = true;
            }
            continue;
        }
        let Some(group) = t.strip_prefix('-').or_else(|| t.strip_prefix('+')) else {
            break;
        };
        i += 1;
        for c in group.chars() {
            match c {
                'c' => has_c = true,
                'o' | 'O' => i += 1,
                _ => {}
            }
        }
    }
    if !has_c {
        return None;
    }
    Some(match args.get(i) {
        None => Ok(String::new()),
        Some(a) if a.resolved => Ok(a.text.clone()),
        Some(a) => Err(format!(
            "`{base} -c` runs `{}`, only known at run time",
            a.text
        )),
    })
}
