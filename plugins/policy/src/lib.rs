//! The built-in policy plugin of toolhost: decides whether a shell command may
//! run (WIT interface `toolhost:plugin/policy@0.1.0`, world `policy-plugin`).
//!
//! The host hands the plugin the text of the operator's `--policy FILE`:
//! [`validate`] once at start-up, then [`decide`] per request. An empty text
//! means the built-in [`DEFAULT_POLICY`] (`default-policy.toml`). The plugin
//! has no file access of its own.
//!
//! # Rules file
//!
//! ```toml
//! allow = ["git status", "cargo test *", "npm run test:*"]
//! ask = ["git push *"]
//! deny = ["rm -rf *"]
//! default = "ask"   # "allow", "ask" or "deny"; "ask" when absent
//! ```
//!
//! Unknown keys, values of the wrong type, empty patterns, a pattern whose
//! program is a wildcard and a bad `default` are refused by [`validate`] with
//! the 1-based line. A text that sets nothing (empty, or only blank lines and
//! `#` comments) means the built-in policy, so an empty policy file and one
//! whose lines are all commented out mean the same.
//!
//! # Pattern language
//!
//! A pattern is whitespace-separated words matched against a simple command's
//! words (program first) after quote removal and wrapper peeling:
//!
//! - a word matches one argument word exactly; `*` inside a word globs within
//!   that word (`test:*` matches `test:unit`, `--output*` matches `--output=x`);
//! - a lone `*` as the **last** word means "any further arguments, including
//!   none": `cargo test *` matches `cargo test` and `cargo test --release`;
//! - a lone `*` elsewhere matches exactly one word (`git * --help`);
//! - `**` anywhere matches any number of words (`git ** --output* **`);
//! - without a trailing `*` the pattern matches exactly those words: `git
//!   status` allows `git status` but not `git status --porcelain` (write `git
//!   status *` for that, like Claude Code's `Bash(git status:*)`), and never
//!   `git status; rm -rf /` (that is two commands, each judged);
//! - the first word names the program. It cannot be `*` or `**`. A program
//!   run by path (`./ls`, `bin/tool`, `/usr/bin/ls`) is matched by deny and
//!   ask rules on its basename *and* its path, but by allow rules only when
//!   the pattern spells out that path (`./gradlew *`): `./ls` is not `ls`,
//!   and conservatively neither is `/bin/ls`.
//!
//! A word that is only known at run time (`$X`, `$(…)`, `~`, an unquoted
//! glob like `*.txt`, `{a,b}`) can only be covered by a trailing `*`/`**`; an
//! exact pattern word "may match" it, which can never allow and, for a deny
//! or ask rule, turns the part into an ask.
//!
//! # How a command is judged
//!
//! The command is parsed with [`brush_parser`] (bash grammar) and every simple
//! command inside is a *part*: lists (`;`, `&&`, `||`, `&`, newlines),
//! pipelines (`|`, `|&`), `$(…)`, backticks, `<(…)`/`>(…)`, subshells, brace
//! groups, `if`/`while`/`for`/`case` bodies, function bodies, here-documents,
//! here-strings, `${x:-$(…)}`, `$((…))`, assignment values and redirection
//! targets. `bash -c 'STRING'` (also `sh`, `zsh`, `dash`, `ksh`, `fish`),
//! `eval 'STRING'`, `trap 'STRING' SIG…`, `flock FILE -c 'STRING'` and a git
//! alias `git -c alias.x='!STRING'` (judged as `STRING "$@"`) are parsed
//! again and their commands judged; a string only known at run time makes
//! them an ask. `find … -exec|-execdir|-ok|-okdir CMD… ;` (or `+`) judges
//! each `CMD` as a command of its own (`{}` is a word only known at run time).
//!
//! Code the policy cannot read is *opaque* ([`shell::Part::opaque`]): an
//! interpreter's inline code (`python3 -c`, `perl -e`, `ruby -e`, `node -e`,
//! `php -r`, `lua -e`, `deno eval`, an `awk` program with `system`, `|` or
//! `>`), a `git -c`/`--config-env` setting outside a short harmless list
//! (`core.pager`, `core.sshCommand`, `core.editor`, `diff.external`,
//! `include.path`, an alias without `!`…), `git --exec-path=DIR`, a word only
//! known at run time where `find` takes its actions or a shell its `-c`, and
//! `NAME=value` before a command for a name that makes it run other code
//! (`LD_PRELOAD`, `PATH`, `BASH_ENV`, `GIT_*`…, see [`start`]). An opaque
//! part is at most asked when the rules have any deny or ask rule, even
//! under `default = "allow"` or an allow rule naming the interpreter: the
//! code may do what those rules refuse. Rules without deny or ask rules have
//! nothing it could get around. Script files, stdin and copied binaries are
//! not seen at all: a deny list is not a sandbox, the kernel sandbox is.
//!
//! Wrappers are peeled with their options understood: `env`, `timeout`,
//! `time`, `nice`, `nohup`, `stdbuf`, `xargs`, `flock`, `sudo`, `doas`, `setsid`,
//! `command`, `exec`, `builtin`. Rules are tried on every layer (`sudo rm -rf
//! /` is checked as written and as `rm -rf /`). A wrapper needs no allow rule
//! of its own, except `sudo`/`doas` (privilege escalation) and wrappers run by
//! path: `sudo ls` is an ask unless a rule allows `sudo ls`. `xargs CMD`
//! judges `CMD` with an unknown trailing argument, so only a `CMD *` rule
//! covers it. An unknown wrapper option makes the part an ask.
//!
//! Per part: a deny rule match denies the whole command. Otherwise an ask
//! rule match, a "may match" of a deny or ask rule, or an *issue* makes it an
//! ask. Otherwise an allow rule match allows it, and a part no rule matches
//! gets `default` (but `default = "allow"` still asks about parts with
//! issues or a `sudo`, and about opaque parts when there are deny or ask
//! rules). A program run by path needs an allow rule spelling out its path,
//! or `default = "allow"`, which allows it like any other program (`./run.sh`)
//! unless a deny or ask rule matches its path or basename. Issues are: a
//! program name only known at run time, a write redirection (anything but `/dev/null`,
//! `/dev/stdout`, `/dev/stderr` and fd duplications like `2>&1`), and a
//! `VAR=value` (or `env VAR=value`) for a variable outside a short harmless
//! list (`LANG`, `LC_*`, `TZ`, `TERM`, `NO_COLOR`, `RUST_LOG`…): `PATH=…`,
//! `LD_PRELOAD=…` change what runs. The request's own environment names and
//! shell are judged too ([`start`]): a name that makes the shell or loader
//! run code (`BASH_ENV`, `BASH_FUNC_*`, `LD_*`, `PATH`, `IFS`, `PS4`…) or a
//! shell the policy does not know is asked even under `default = "allow"`
//! (denied under `default = "deny"`), other names outside the harmless list
//! like a `VAR=value`. A parse error, input longer than
//! [`shell::MAX_INPUT`], nesting deeper than [`shell::MAX_NESTING`] or
//! re-parses deeper than [`shell::MAX_DEPTH`] are asks too (denies under
//! `default = "deny"`). An empty command is an ask. The command is allowed
//! only when every part is allowed.

#![deny(missing_docs)]

pub mod judge;
/// The pattern language, shared with manifest exec grants (`host/pattern`).
pub use toolhost_pattern as pattern;
pub mod rules;
pub mod shell;
pub mod start;
pub mod wrappers;

pub use judge::Decision;
pub use rules::{DEFAULT_POLICY, DefaultAction, Rules, RulesError};

/// The ids and labels of the options offered with every ask (the ACP kinds).
pub const OPTIONS: [(&str, &str); 4] = [
    ("allow_once", "Allow once"),
    ("allow_always", "Allow always"),
    ("reject_once", "Reject once"),
    ("reject_always", "Reject always"),
];

/// A process start to decide, the part of the WIT `process-start` the policy uses.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// The command line, as the shell will receive it.
    pub command: String,
    /// The working directory (absolute, inside the workspace).
    pub cwd: String,
    /// The workspace root (absolute).
    pub workspace: String,
    /// Names of the environment variables the request sets (values withheld).
    pub env_keys: Vec<String>,
    /// The shell that runs the command (absolute; empty: the default `/bin/sh`).
    pub shell: String,
}

/// Checks a rules text; empty text (the built-in policy) is always valid.
pub fn validate(rules: &str) -> Result<(), RulesError> {
    Rules::parse(rules).map(|_| ())
}

/// Decides one request under `rules` (the text [`validate`] accepted, or
/// empty for the built-in policy). Rules that fail to parse deny everything.
pub fn decide(rules: &str, request: &Request) -> Decision {
    match Rules::parse(rules) {
        Ok(rules) => decide_with(&rules, request),
        Err(e) => invalid_rules(&e),
    }
}

/// The parsed form of the last rules text seen, so a policy instance that
/// decides many requests under the same rules parses them once.
///
/// The key is the whole text, compared byte for byte on every use (a hash
/// alone would not prove that two texts are the same rules). Parsing is a
/// pure function of the text, so [`decide_cached`] answers exactly what
/// [`decide`] answers for the same arguments; the cache only skips the work.
/// One entry: a policy instance decides under the one rules text its host
/// was given (`toolhost_runtime`'s `PolicyPlugin`),
/// and a different text replaces it.
#[derive(Debug, Default)]
pub struct RulesCache {
    entry: Option<(String, Result<Rules, RulesError>)>,
}

impl RulesCache {
    /// An empty cache.
    pub const fn new() -> RulesCache {
        RulesCache { entry: None }
    }

    /// The rules `text` parses to ([`Rules::parse`]), parsed now unless the
    /// last text asked for was the same text.
    ///
    /// Errors: the text's [`RulesError`], as [`Rules::parse`] gives it.
    pub fn get(&mut self, text: &str) -> &Result<Rules, RulesError> {
        let hit = matches!(&self.entry, Some((cached, _)) if cached.as_str() == text);
        if !hit {
            self.entry = Some((text.to_string(), Rules::parse(text)));
        }
        match &self.entry {
            Some((_, parsed)) => parsed,
            None => unreachable!("filled above"),
        }
    }
}

/// [`validate`] through `cache`: the parsed rules stay in it for
/// [`decide_cached`].
///
/// Errors: the text's [`RulesError`].
pub fn validate_cached(cache: &mut RulesCache, rules: &str) -> Result<(), RulesError> {
    cache.get(rules).as_ref().map(|_| ()).map_err(Clone::clone)
}

/// [`decide`] with the rules parsed through `cache`: the same decision,
/// without parsing a rules text the cache already holds.
pub fn decide_cached(cache: &mut RulesCache, rules: &str, request: &Request) -> Decision {
    match cache.get(rules) {
        Ok(rules) => decide_with(rules, request),
        Err(e) => invalid_rules(e),
    }
}

/// The decision under rules that failed to parse: deny everything.
fn invalid_rules(e: &RulesError) -> Decision {
    Decision::Deny(format!(
        "the policy rules are invalid ({e}); fix the policy file"
    ))
}

/// Decides one request under already parsed rules.
///
/// A command longer than [`shell::MAX_INPUT`] (1 MiB) is denied with a message
/// that names the limit: it cannot be checked, and nobody can review it.
/// The request's environment names and shell add [`start::findings`]: its
/// issues make the decision at least an ask (a deny under `default =
/// "deny"`), its effects an ask unless `default = "allow"`.
pub fn decide_with(rules: &Rules, request: &Request) -> Decision {
    if request.command.len() > shell::MAX_INPUT {
        return Decision::Deny(format!(
            "the command is {} bytes; the policy checks commands of at most {} bytes (1 MiB). \
             Write long content in several smaller commands (e.g. heredocs appending with `>>`).",
            request.command.len(),
            shell::MAX_INPUT
        ));
    }
    let ctx = shell::Context {
        cwd: request.cwd.clone(),
        workspace: request.workspace.clone(),
    };
    let mut analysis = shell::analyze(&request.command, &ctx);
    let found = start::findings(&request.env_keys, &request.shell);
    if !found.issues.is_empty() && rules.default == DefaultAction::Deny {
        // A deny rule on the command still names itself first.
        if let denied @ Decision::Deny(_) = judge::judge(rules, &request.command, &analysis) {
            return denied;
        }
        return Decision::Deny(format!(
            "{}, and the policy default is deny. No rule can allow this (rules match commands, \
             not environment names or shells): start the command without it.",
            found.issues.join("; ")
        ));
    }
    analysis.issues.extend(found.issues);
    analysis.effects.extend(found.effects);
    judge::judge(rules, &request.command, &analysis)
}

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({
        path: "../../wit/v0.1.0",
        world: "toolhost:plugin/policy-plugin@0.1.0",
        generate_all,
    });
    use exports::toolhost::plugin::policy::{
        Action, Ask, Decision, Guest, PermissionOption, PermissionOptionKind, PermissionRequest,
        RulesError,
    };

    struct Policy;

    std::thread_local! {
        /// The parsed rules of this instance. The host may keep an instance
        /// for several decisions (under the one rules text it was given);
        /// each call still gets its answer from the text it passes, compared
        /// whole against the cached one (`RulesCache`).
        static CACHE: std::cell::RefCell<super::RulesCache> =
            const { std::cell::RefCell::new(super::RulesCache::new()) };
    }

    impl Guest for Policy {
        fn validate(rules: String) -> Result<(), RulesError> {
            CACHE
                .with_borrow_mut(|cache| super::validate_cached(cache, &rules))
                .map_err(|e| RulesError {
                    line: e.line,
                    message: e.message,
                })
        }

        fn decide(rules: String, request: PermissionRequest) -> Decision {
            let Action::ProcessStart(start) = request.action;
            let req = super::Request {
                command: start.command,
                cwd: start.cwd,
                workspace: start.workspace,
                env_keys: start.env_keys,
                shell: start.shell,
            };
            match CACHE.with_borrow_mut(|cache| super::decide_cached(cache, &rules, &req)) {
                super::Decision::Allow => Decision::Allow,
                super::Decision::Deny(why) => Decision::Deny(why),
                super::Decision::Ask(prompt) => Decision::Ask(Ask {
                    prompt,
                    options: super::OPTIONS
                        .iter()
                        .zip([
                            PermissionOptionKind::AllowOnce,
                            PermissionOptionKind::AllowAlways,
                            PermissionOptionKind::RejectOnce,
                            PermissionOptionKind::RejectAlways,
                        ])
                        .map(|((id, name), kind)| PermissionOption {
                            option_id: (*id).to_string(),
                            name: (*name).to_string(),
                            kind,
                        })
                        .collect(),
                }),
            }
        }
    }
    export!(Policy);
}
