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
    // `flock [opts] FILE CMD…`, `flock [opts] FILE -c STRING` (made `sh -c
    // STRING` below) and `flock [opts] FD` (no command). util-linux stops at
    // the first operand (`+` in its getopt string).
    Spec {
        name: "flock",
        flags: "sexnoFu",
        with_arg: "wE",
        long_flags: &[
            "shared",
            "exclusive",
            "nonblock",
            "nb",
            "unlock",
            "close",
            "no-fork",
            "verbose",
        ],
        long_with_arg: &["timeout", "wait", "conflict-exit-code"],
        no_command: &["h", "V", "help", "version"],
        positional: 1,
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
    if spec.name == "flock"
        && let Some(first) = rest.first()
        && matches!(first.text.as_str(), "-c" | "--command")
    {
        // `flock FILE -c STRING` runs `$SHELL -c STRING` (exactly one string).
        return match rest {
            [_, script] => Peel::Inner {
                inner: vec![Arg::literal("sh"), Arg::literal("-c"), script.clone()],
                env: Vec::new(),
                privileged: false,
                notes,
            },
            _ => Peel::NoCommand,
        };
    }
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
    if base == "trap" {
        return trap_action(args);
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

/// `trap [-lp] [[ACTION] SIGNAL…]`: the action string, which the shell runs
/// when the signal comes (`trap 'rm x' EXIT`). `-l`/`-p` and a lone operand
/// or `-` as the action (a reset) run nothing.
fn trap_action(args: &[Arg]) -> Option<Result<String, String>> {
    let mut i = 0;
    if let Some(a) = args.first().filter(|a| a.resolved) {
        match a.text.as_str() {
            "--" => i = 1,
            t if t.len() > 1 && t.starts_with('-') => {
                if t[1..].chars().all(|c| c == 'l' || c == 'p') {
                    return None;
                }
                // An unknown option: bash refuses it and runs nothing.
                return Some(Ok(String::new()));
            }
            _ => {}
        }
    }
    let operands = &args[i.min(args.len())..];
    match operands {
        [] | [_] => Some(Ok(String::new())),
        [action, ..] if !action.resolved => Some(Err(format!(
            "`trap` sets the action `{}`, only known at run time",
            action.text
        ))),
        [action, ..] if action.text == "-" => Some(Ok(String::new())),
        [action, ..] => Some(Ok(action.text.clone())),
    }
}

/// What a program that runs other programs from its arguments runs: `find
/// -exec`, `git -c alias.x='!…'`, an interpreter's `-c`/`-e` code.
#[derive(Debug, Default)]
pub struct Embedded {
    /// Commands it runs, as words (`find -exec CMD… ;`), judged as parts.
    pub commands: Vec<Vec<Arg>>,
    /// Shell strings it runs (`git -c alias.x='!CMD'`), parsed and judged.
    pub scripts: Vec<String>,
    /// Code or programs it runs that the policy cannot read (`python3 -c`,
    /// `git -c core.pager=…`, a word only known at run time where `find`
    /// takes its actions). At most asked when the rules restrict anything
    /// (they have deny or ask rules): that code may do what they refuse.
    pub opaque: Vec<String>,
}

/// Scans the arguments of `base` for the commands and code it runs.
pub fn embedded(base: &str, args: &[Arg]) -> Embedded {
    if base == "find" {
        return find(args);
    }
    if base == "git" {
        return git(args);
    }
    let mut out = Embedded::default();
    if let Some(why) = inline_code(base, args) {
        out.opaque.push(why);
    }
    if SHELLS.contains(&base) {
        // Without `-c` ([`shell_script`] found none): a word only known at
        // run time where the options go may be `-c STRING`.
        let unknown = args
            .iter()
            .take_while(|a| !a.resolved || a.text.starts_with(['-', '+']))
            .find(|a| !a.resolved);
        if let Some(a) = unknown {
            out.opaque.push(format!(
                "`{base}` gets `{}`, only known at run time, where its options (and `-c`) go",
                a.text
            ));
        }
    }
    out
}

/// `find … -exec|-execdir|-ok|-okdir CMD… ;` (or `+`): each CMD with `{}`
/// (the file name) only known at run time.
fn find(args: &[Arg]) -> Embedded {
    let mut out = Embedded::default();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        if !a.resolved {
            out.opaque.push(format!(
                "`find` gets `{}`, only known at run time, where it takes actions like \
                 `-exec` or `-delete`",
                a.text
            ));
            continue;
        }
        if !matches!(a.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            continue;
        }
        let mut cmd = Vec::new();
        while let Some(w) = args.get(i) {
            i += 1;
            // `+` ends the command only right after `{}` (as in GNU find).
            let plus = w.text == "+" && cmd.last().is_some_and(|l: &Arg| l.text == "{}");
            if w.resolved && (w.text == ";" || plus) {
                break;
            }
            cmd.push(if w.text.contains("{}") {
                Arg::unresolved(w.text.clone())
            } else {
                w.clone()
            });
        }
        if !cmd.is_empty() {
            out.commands.push(cmd);
        }
    }
    out
}

/// Sections of `git -c` settings that run no program.
const GIT_SAFE_SECTIONS: &[&str] = &[
    "advice",
    "author",
    "blame",
    "color",
    "column",
    "committer",
    "i18n",
    "safe",
    "status",
    "user",
];

/// `git -c` settings (lower case) that run no program.
const GIT_SAFE_KEYS: &[&str] = &[
    "core.abbrev",
    "core.autocrlf",
    "core.eol",
    "core.filemode",
    "core.ignorecase",
    "core.quotepath",
    "core.safecrlf",
    "core.symlinks",
    "core.whitespace",
    "diff.algorithm",
    "diff.colormoved",
    "diff.mnemonicprefix",
    "diff.noprefix",
    "diff.relative",
    "diff.renames",
    "fetch.prune",
    "init.defaultbranch",
    "log.date",
    "log.decorate",
    "merge.conflictstyle",
    "protocol.version",
    "pull.ff",
    "pull.rebase",
    "push.autosetupremote",
    "push.default",
    "rebase.autosquash",
    "rebase.autostash",
];

/// `git [-c KEY=VALUE | --config-env=KEY=VAR | --exec-path=DIR | …] CMD …`:
/// an alias `!CMD` is a shell string (run with git's further arguments
/// appended, so judged with `"$@"`); any other setting outside a short list
/// of harmless ones may run a program (`core.pager`, `core.sshCommand`,
/// `core.editor`, `diff.external`, `alias.x=push`, `include.path`…).
fn git(args: &[Arg]) -> Embedded {
    let mut out = Embedded::default();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        if !a.resolved {
            out.opaque.push(format!(
                "`git` gets `{}`, only known at run time, where its settings go",
                a.text
            ));
            break;
        }
        let t = a.text.as_str();
        let setting = match t {
            "-c" | "--config-env" => match args.get(i) {
                Some(v) => {
                    i += 1;
                    Some((t, v))
                }
                None => break,
            },
            _ if t.starts_with("--config-env=") => None,
            "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--super-prefix"
            | "--attr-source" => {
                i += 1;
                continue;
            }
            _ if t.starts_with("--exec-path=") => {
                out.opaque
                    .push(format!("`git {t}` runs git commands from that directory"));
                continue;
            }
            _ if t.starts_with('-') => continue,
            _ => break,
        };
        let (flag, value) = match setting {
            Some((flag, v)) => (flag, v.clone()),
            None => {
                let (flag, v) = t.split_once('=').unwrap_or((t, ""));
                (flag, Arg::literal(v))
            }
        };
        if !value.resolved {
            out.opaque.push(format!(
                "`git {flag} {}` sets something only known at run time",
                value.text
            ));
            continue;
        }
        let (key, val) = value.text.split_once('=').unwrap_or((&value.text, ""));
        let lower = key.to_ascii_lowercase();
        let section = lower.split('.').next().unwrap_or_default();
        if GIT_SAFE_SECTIONS.contains(&section) || GIT_SAFE_KEYS.contains(&lower.as_str()) {
            continue;
        }
        if flag == "-c"
            && section == "alias"
            && let Some(script) = val.strip_prefix('!')
        {
            out.scripts.push(format!("{script} \"$@\""));
            continue;
        }
        out.opaque.push(format!(
            "`git {flag} {key}=…` may make git run a program this policy cannot check"
        ));
    }
    out
}

/// Interpreters and the options that hand them code inline.
struct Interp {
    /// Basenames (a trailing `*` matches versions: `python3.12`).
    names: &'static [&'static str],
    /// Short options whose presence in a group means inline code.
    code_short: &'static str,
    /// Long options (without `--`) that take inline code.
    code_long: &'static [&'static str],
    /// Short options taking a value (attached, or the next word when last).
    with_arg: &'static str,
    /// Short options after which the options end (`python -m MOD`).
    stop: &'static str,
}

const INTERPS: &[Interp] = &[
    Interp {
        names: &["python", "python2*", "python3*", "pypy", "pypy3*"],
        code_short: "c",
        code_long: &[],
        with_arg: "WXQ",
        stop: "m",
    },
    Interp {
        names: &["perl", "perl5*"],
        code_short: "eE",
        code_long: &[],
        with_arg: "IMm",
        stop: "",
    },
    Interp {
        names: &["ruby", "jruby"],
        code_short: "e",
        code_long: &[],
        with_arg: "IrCEF",
        stop: "",
    },
    Interp {
        names: &["node", "nodejs", "bun"],
        code_short: "ep",
        code_long: &["eval", "print"],
        with_arg: "r",
        stop: "",
    },
    Interp {
        names: &["php", "php*"],
        code_short: "rBRE",
        code_long: &["run"],
        with_arg: "cdzf",
        stop: "",
    },
    Interp {
        names: &["lua", "lua5*", "luajit"],
        code_short: "e",
        code_long: &[],
        with_arg: "l",
        stop: "",
    },
    Interp {
        names: &["Rscript", "R"],
        code_short: "e",
        code_long: &[],
        with_arg: "",
        stop: "",
    },
    Interp {
        names: &["osascript"],
        code_short: "e",
        code_long: &[],
        with_arg: "",
        stop: "",
    },
];

fn name_matches(pat: &str, base: &str) -> bool {
    match pat.strip_suffix('*') {
        Some(prefix) => base.starts_with(prefix),
        None => pat == base,
    }
}

/// For an interpreter given code inline (`python3 -c`, `perl -e`, `node
/// -e`, `awk 'BEGIN{system(…)}'`, `deno eval`), why the policy cannot read
/// what it runs. A script file or stdin is not seen either (documented).
pub fn inline_code(base: &str, args: &[Arg]) -> Option<String> {
    if matches!(base, "awk" | "gawk" | "mawk" | "nawk") {
        return awk(base, args);
    }
    if base == "deno" {
        return args
            .iter()
            .find(|a| !a.text.starts_with('-') || !a.resolved)
            .filter(|a| !a.resolved || a.text == "eval")
            .map(|_| "`deno eval` runs code this policy cannot read".to_string());
    }
    let interp = INTERPS
        .iter()
        .find(|i| i.names.iter().any(|n| name_matches(n, base)))?;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        if !a.resolved {
            return Some(format!(
                "`{base}` gets `{}`, only known at run time, where its options (and inline \
                 code) go",
                a.text
            ));
        }
        let t = a.text.as_str();
        if t == "--" || t == "-" || !t.starts_with('-') {
            return None;
        }
        if let Some(long) = t.strip_prefix("--") {
            let name = long.split_once('=').map_or(long, |(n, _)| n);
            if interp.code_long.contains(&name) {
                return Some(format!(
                    "`{base} --{name}` runs code this policy cannot read"
                ));
            }
            // A long option may take the next word as its value.
            if !long.contains('=')
                && args
                    .get(i)
                    .is_some_and(|v| v.resolved && !v.text.starts_with('-'))
            {
                i += 1;
            }
            continue;
        }
        for (j, c) in t[1..].char_indices() {
            if interp.code_short.contains(c) {
                return Some(format!("`{base} -{c}` runs code this policy cannot read"));
            }
            if interp.stop.contains(c) {
                return None;
            }
            if interp.with_arg.contains(c) {
                if j + c.len_utf8() == t.len() - 1 {
                    i += 1;
                }
                break;
            }
        }
    }
    None
}

/// `awk [opts] 'PROGRAM' FILE…`: a program that can run commands
/// (`system()`, `| getline`, `print | "cmd"`) or write files (`print >
/// "f"`) is code the policy cannot read; `-f FILE` programs are not seen.
fn awk(base: &str, args: &[Arg]) -> Option<String> {
    let mut programs: Vec<&Arg> = Vec::new();
    let mut from_file = false;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        let t = a.text.as_str();
        if !a.resolved && (programs.is_empty() && !from_file) {
            programs.push(a);
            break;
        }
        if t == "--" {
            if !from_file && let Some(p) = args.get(i) {
                programs.push(p);
            }
            break;
        }
        if !t.starts_with('-') || t == "-" {
            if !from_file {
                programs.push(a);
            }
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            match name {
                "source" => match value {
                    Some(_) => programs.push(a),
                    None => {
                        if let Some(v) = args.get(i) {
                            programs.push(v);
                        }
                        i += 1;
                    }
                },
                "load" => return Some(format!("`{base} --load` loads a native extension")),
                "file" | "include" => {
                    from_file |= name == "file";
                    i += usize::from(value.is_none());
                }
                "field-separator" | "assign" | "exec" => {
                    from_file |= name == "exec";
                    i += usize::from(value.is_none());
                }
                _ => {}
            }
            continue;
        }
        let c = t[1..].chars().next().unwrap_or('-');
        let attached = t.len() > 2;
        match c {
            'l' => return Some(format!("`{base} -l` loads a native extension")),
            'e' => {
                if attached {
                    programs.push(a);
                } else {
                    if let Some(v) = args.get(i) {
                        programs.push(v);
                    }
                    i += 1;
                }
            }
            'f' | 'E' | 'i' | 'F' | 'v' | 'W' => {
                from_file |= matches!(c, 'f' | 'E');
                i += usize::from(!attached);
            }
            _ => {}
        }
    }
    for p in programs {
        if !p.resolved {
            return Some(format!(
                "`{base}` runs the program `{}`, only known at run time",
                p.text
            ));
        }
        if p.text.contains("system") || p.text.contains('|') || p.text.contains('>') {
            return Some(format!(
                "the `{base}` program may run commands or write files (`system`, `|`, `>`), \
                 which this policy cannot check"
            ));
        }
    }
    None
}
