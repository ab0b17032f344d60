//! The request around the command: environment names and the shell
//! (`process-start.env-keys`, `shell`) judged with the command text.

use toolhost_policy::start::{KNOWN_SHELLS, env_runs_code};
use toolhost_policy::{Decision, Request, decide};

const DEF: &str = "";
const ALLOW: &str = "default = \"allow\"\nallow = [\"sleep *\"]\n";
const DENY: &str = "default = \"deny\"\nallow = [\"sleep *\"]\ndeny = [\"rm *\"]\n";

fn run(rules: &str, command: &str, env: &[&str], shell: &str) -> Decision {
    decide(
        rules,
        &Request {
            command: command.to_string(),
            cwd: "/ws".to_string(),
            workspace: "/ws".to_string(),
            env_keys: env.iter().map(|k| k.to_string()).collect(),
            shell: shell.to_string(),
        },
    )
}

/// Names that make bash, ld.so or a common program run code.
const CODE_RUNNING: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "BASH_FUNC_sleep%%",
    "BASH_FUNC_sleep()",
    "sleep()",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "PATH",
    "IFS",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "PROMPT_COMMAND",
    "GLOBIGNORE",
    "CDPATH",
    "HOME",
    "GIT_SSH_COMMAND",
    "GIT_CONFIG_PARAMETERS",
    "PAGER",
    "EDITOR",
    "PYTHONPATH",
    "NODE_OPTIONS",
    "PERL5OPT",
    "GCONV_PATH",
    "GLIBC_TUNABLES",
];

#[test]
fn code_running_names_are_known() {
    for name in CODE_RUNNING {
        assert!(env_runs_code(name), "{name}");
    }
    for name in ["LANG", "MY_TOOL_MODE", "NOTES", "TZ"] {
        assert!(!env_runs_code(name), "{name}");
    }
}

#[test]
fn code_running_env_asks_even_when_the_command_is_allowed() {
    // The command alone is allowed by every rules text here.
    for rules in [DEF, ALLOW] {
        assert_eq!(run(rules, "sleep 1", &[], "/bin/sh"), Decision::Allow);
        for name in CODE_RUNNING {
            match run(rules, "sleep 1", &["LANG", name], "/bin/sh") {
                Decision::Ask(prompt) => {
                    assert!(prompt.contains(&format!("`{name}`")), "{prompt}");
                    assert!(prompt.contains("run other code"), "{prompt}");
                    assert!(!prompt.contains("`LANG`"), "{prompt}");
                }
                other => panic!("{rules:?} {name}: {other:?}"),
            }
        }
    }
    // Under `default = "deny"` they are refused, saying no rule can allow them.
    match run(DENY, "sleep 1", &["BASH_ENV"], "/bin/sh") {
        Decision::Deny(why) => {
            assert!(why.contains("`BASH_ENV`"), "{why}");
            assert!(why.contains("policy default is deny"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    // A deny rule on the command still names itself.
    match run(DENY, "rm x", &["BASH_ENV"], "/bin/sh") {
        Decision::Deny(why) => assert!(why.contains("deny rule `rm *`"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn harmless_and_other_env_names() {
    for rules in [DEF, ALLOW, DENY] {
        assert_eq!(
            run(
                rules,
                "sleep 1",
                &["LANG", "LC_ALL", "TZ", "NO_COLOR", "CI"],
                "/bin/sh"
            ),
            Decision::Allow,
            "{rules:?}"
        );
    }
    // Another name is an effect, like `MY_TOOL_MODE=x sleep 1`: asked unless
    // `default = "allow"`.
    match run(DEF, "sleep 1", &["MY_TOOL_MODE"], "/bin/sh") {
        Decision::Ask(prompt) => assert!(prompt.contains("`MY_TOOL_MODE`"), "{prompt}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        run(DEF, "MY_TOOL_MODE=x sleep 1", &[], "/bin/sh").kind(),
        "ask"
    );
    assert_eq!(
        run(ALLOW, "sleep 1", &["MY_TOOL_MODE"], "/bin/sh"),
        Decision::Allow
    );
}

#[test]
fn a_shell_the_policy_does_not_know_asks() {
    for shell in KNOWN_SHELLS.iter().chain(&[""]) {
        assert_eq!(run(DEF, "sleep 1", &[], shell), Decision::Allow, "{shell}");
    }
    for rules in [DEF, ALLOW] {
        for shell in [
            "/usr/bin/python3",
            "/usr/bin/fish",
            "/tmp/x/sh",
            "/bin/../bin/sh",
        ] {
            match run(rules, "sleep 1", &[], shell) {
                Decision::Ask(prompt) => {
                    assert!(prompt.contains(&format!("`{shell}`")), "{prompt}")
                }
                other => panic!("{rules:?} {shell}: {other:?}"),
            }
        }
    }
    assert_eq!(run(DENY, "sleep 1", &[], "/usr/bin/python3").kind(), "deny");
}

#[test]
fn stdin_is_not_seen_so_an_interpreter_rule_covers_what_it_reads() {
    // The policy decides on the command text: `sh` on its own (which would
    // run a script fed on stdin) is asked under the default policy, and only
    // a rule naming the shell allows it, as it allows `sh script.sh`.
    assert_eq!(run(DEF, "sh", &[], "/bin/sh").kind(), "ask");
    assert_eq!(run(DEF, "python3", &[], "/bin/sh").kind(), "ask");
    assert_eq!(run(DEF, "bash -s", &[], "/bin/sh").kind(), "ask");
    let sh_rule = "allow = [\"sh *\"]\n";
    assert_eq!(run(sh_rule, "sh", &[], "/bin/sh"), Decision::Allow);
    assert_eq!(
        run(sh_rule, "sh script.sh", &[], "/bin/sh"),
        Decision::Allow
    );
}
