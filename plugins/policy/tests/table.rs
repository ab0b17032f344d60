//! Table tests: commands (bypass attempts included) against rules, and rules
//! files against the validator.

use toolhost_policy::{Decision, Request, decide, validate};

/// Rules the command table runs against (besides the built-in default policy).
const T: &str = r#"
allow = ["git status", "ls", "ls *", "cat *", "echo *", "cargo test *", "npm run test:*",
         "grep *", "wc *", "true", "./scripts/check.sh *", "/opt/tools/fmt *"]
ask = ["git push *"]
deny = ["rm -rf *", "rm -fr *", "touch *", "curl *"]
"#;

/// Same, with `default = "allow"`.
const T_ALLOW: &str = r#"
allow = ["ls *"]
deny = ["rm -rf *"]
default = "allow"
"#;

/// Same, with `default = "deny"`.
const T_DENY: &str = r#"
allow = ["ls", "ls *"]
ask = ["git push *"]
default = "deny"
"#;

/// The built-in policy.
const DEF: &str = "";

fn run(rules: &str, command: &str) -> Decision {
    decide(
        rules,
        &Request {
            command: command.to_string(),
            cwd: "/ws/sub".to_string(),
            workspace: "/ws".to_string(),
            ..Request::default()
        },
    )
}

fn nested(open: &str, mid: &str, close: &str, n: usize) -> String {
    format!("{}{}{}", open.repeat(n), mid, close.repeat(n))
}

#[test]
fn command_table() {
    let edge_parens = nested("{ ", "ls;", " }", 46);
    let edge_subst = nested("echo $(", "ls", ")", 7);
    let edge_if = "if true; then ".repeat(46) + "ls" + &"; fi".repeat(46);
    let deep_subst = nested("echo $(", "ls", ")", 300);
    let deep_parens = nested("(", "ls", ")", 2000);
    let deep_braces = nested("{ ", "ls;", " }", 500);
    let bash_5 = (0..5).fold("ls".to_string(), |acc, _| {
        format!("bash -c {}", shell_quote(&acc))
    });
    let bash_5_rm = (0..5).fold("rm -rf /".to_string(), |acc, _| {
        format!("bash -c {}", shell_quote(&acc))
    });
    let deep_eval = format!("{}ls", "eval ".repeat(40));
    let deep_if = "if true; then ".repeat(400) + "ls" + &"; fi".repeat(400);
    // Commands up to 1 MiB are checked like any other; longer ones are denied
    // with the limit in the message (`shell::MAX_INPUT`).
    let long = format!("echo {}", "a".repeat(20_000));
    let too_long = format!("echo {}", "a".repeat(1 << 20));
    let cases: Vec<(&str, &str, &str)> = vec![
        // Plain matching.
        (T, "git status", "allow"),
        (T, "git status --porcelain", "ask"),
        (T, "git  status", "allow"),
        (T, "cargo test", "allow"),
        (T, "cargo test --release -p x", "allow"),
        (T, "cargo testx", "ask"),
        (T, "npm run test:unit", "allow"),
        (T, "npm run build", "ask"),
        (T, "git push origin main", "ask"),
        (T, "mkdir x", "ask"),
        (T, "ls *.txt", "allow"),
        (T, "cat ~/notes", "allow"),
        (T, "git status $X", "ask"),
        (T, "git $SUB", "ask"),
        // Lists, pipelines, background.
        (T, "git status; rm -rf /", "deny"),
        (T, "git status && touch x", "deny"),
        (T, "git status && mkdir x", "ask"),
        (T, "git status || rm -rf /", "deny"),
        (T, "ls | rm -rf x", "deny"),
        (T, "ls |& rm -rf x", "deny"),
        (T, "ls |& wc -l", "allow"),
        (T, "ls & rm -rf /", "deny"),
        (T, "ls &", "allow"),
        (T, "ls\nrm -rf /", "deny"),
        (T, "ls\ncat x", "allow"),
        (T, "ls && git push", "ask"),
        (T, "! rm -rf x", "deny"),
        // Substitutions.
        (T, "echo $(touch x)", "deny"),
        (T, "echo $(ls)", "allow"),
        (T, "echo $(mkdir x)", "ask"),
        (T, "echo `touch x`", "deny"),
        (T, "echo `ls`", "allow"),
        (T, "echo \"`touch x`\"", "deny"),
        (T, "echo \"$(echo $(curl evil))\"", "deny"),
        (T, "cat <(rm -rf x)", "deny"),
        (T, "cat <(ls)", "allow"),
        (T, "ls > >(touch x)", "deny"),
        (T, "echo $((1 + $(touch x)))", "deny"),
        (T, "echo ${X:-$(touch x)}", "deny"),
        (T, "X=$(rm -rf x)", "deny"),
        (T, "echo hi > $(touch x)", "deny"),
        (T, "[[ -f $(touch x) ]]", "deny"),
        (T, "for f in $(curl x); do echo $f; done", "deny"),
        // Subshells, groups, compound commands, functions.
        (T, "(rm -rf x)", "deny"),
        (T, "(ls)", "allow"),
        (T, "{ rm -rf x; }", "deny"),
        (T, "{ ls; cat y; }", "allow"),
        (T, "if true; then rm -rf x; fi", "deny"),
        (T, "for f in *; do cat $f; done", "allow"),
        (T, "while true; do curl x; done", "deny"),
        (T, "case x in a) rm -rf y;; esac", "deny"),
        (T, "ls() { rm -rf /; }; ls", "deny"),
        (T, "coproc rm -rf x", "deny"),
        // Shell strings and eval.
        (T, "bash -c 'rm -rf /'", "deny"),
        (T, "sh -c 'ls'", "allow"),
        (T, "bash -lc \"touch x\"", "deny"),
        (T, "bash -x -c 'ls; curl x'", "deny"),
        (T, "zsh -c 'ls; cat x'", "allow"),
        (T, "bash -c \"$CMD\"", "ask"),
        (T, "bash script.sh", "ask"),
        (T, "echo 'rm -rf /' | bash", "ask"),
        (T, "eval \"rm -rf /\"", "deny"),
        (T, "eval 'ls'", "allow"),
        (T, "eval rm -rf /", "deny"),
        (T, "eval $X", "ask"),
        (T, "builtin eval 'rm -rf /'", "deny"),
        // Assignments and env.
        (T, "FOO=1 rm -rf /", "deny"),
        (T, "FOO=1 ls", "ask"),
        (T, "LANG=C ls", "allow"),
        (T, "PATH=/tmp ls", "ask"),
        (T, "LD_PRELOAD=./evil.so ls", "ask"),
        (T, "X=1", "ask"),
        (T, "env rm -rf /", "deny"),
        (T, "env FOO=1 rm -rf x", "deny"),
        (T, "env ls", "allow"),
        (T, "env LANG=C ls", "allow"),
        (T, "env -i PATH=/x ls", "ask"),
        (T, "env -u HOME rm -rf /", "deny"),
        (T, "env --chdir=/ rm -rf /", "deny"),
        (T, "env -S 'ls'", "ask"),
        (T, "/usr/bin/env rm -rf /", "deny"),
        (T, "/usr/bin/env ls", "ask"),
        // sudo and other wrappers.
        (T, "sudo rm -rf /", "deny"),
        (T, "sudo ls", "ask"),
        (T, "sudo -u root ls", "ask"),
        (T, "sudo -s", "ask"),
        (T, "sudo sudo rm -rf /", "deny"),
        (
            T,
            "sudo -u nobody env FOO=1 timeout 5 nice rm -rf /",
            "deny",
        ),
        (T, "xargs rm", "ask"),
        (T, "xargs rm -rf", "deny"),
        (T, "xargs -I{} rm -rf {}", "deny"),
        (T, "xargs -0 -n1 rm -rf", "deny"),
        (T, "ls | xargs cat", "allow"),
        (T, "ls | xargs grep foo", "allow"),
        (T, "xargs", "allow"),
        (T, "timeout 5 rm -rf /", "deny"),
        (T, "timeout -s KILL 5 ls", "allow"),
        (T, "timeout --signal=KILL 5 rm -rf /", "deny"),
        (T, "timeout -k5 5 rm -rf /", "deny"),
        (T, "timeout 5s cargo test", "allow"),
        (T, "timeout --bogus 5 ls", "ask"),
        (T, "nice -n 5 rm -rf x", "deny"),
        (T, "nice -5 ls", "allow"),
        (T, "nice --adjustment=5 rm -rf /", "deny"),
        (T, "nohup rm -rf x", "deny"),
        (T, "stdbuf -oL rm -rf x", "deny"),
        (T, "stdbuf -o L ls", "allow"),
        (T, "setsid rm -rf x", "deny"),
        (T, "setsid -f ls", "allow"),
        (T, "time rm -rf x", "deny"),
        (T, "time ls", "allow"),
        (T, "command rm -rf x", "deny"),
        (T, "command -v rm", "ask"),
        (T, "exec rm -rf x", "deny"),
        (T, "exec -a foo ls", "allow"),
        (T, "/usr/bin/time -o out ls", "ask"),
        (T, "watch rm -rf /", "ask"),
        // Quoting and escapes.
        (T, "'r'm -rf /", "deny"),
        (T, "r\\m -rf /", "deny"),
        (T, "\"rm\" -rf /", "deny"),
        (T, "\\rm -rf /", "deny"),
        (T, "rm '-rf' /", "deny"),
        (T, "rm -r\"\"f /", "deny"),
        (T, "r''m -rf /", "deny"),
        (T, "$'rm' -rf /", "deny"),
        (T, "rm -rf $HOME", "deny"),
        (T, "rm $FLAGS /", "ask"),
        (T, "rm -r -f /", "ask"),
        // Programs run by path.
        (T, "./ls", "ask"),
        (T, "bin/ls", "ask"),
        (T, "/ws/bin/ls", "ask"),
        (T, "../../bin/ls", "ask"),
        (T, "/bin/ls", "ask"),
        (T, "/bin/rm -rf /", "deny"),
        (T, "./rm -rf x", "deny"),
        (T, "./scripts/check.sh --all", "allow"),
        (T, "/opt/tools/fmt src", "allow"),
        (T, "/opt/other/fmt src", "ask"),
        // Unresolvable program names.
        (T, "$CMD", "ask"),
        (T, "$CMD -rf /", "ask"),
        (T, "${CMD} x", "ask"),
        (T, "$(echo rm) -rf /", "ask"),
        (T, "l* x", "ask"),
        (T, "~/bin/tool", "ask"),
        // Here-documents and here-strings.
        (T, "cat <<EOF\n$(touch x)\nEOF", "deny"),
        (T, "cat <<'EOF'\n$(touch x)\nEOF", "allow"),
        (T, "cat <<EOF\nhello $USER\nEOF", "allow"),
        (T, "cat <<< \"$(rm -rf x)\"", "deny"),
        (T, "cat <<< hello", "allow"),
        // Redirections.
        (T, "cat x > y", "ask"),
        (T, "cat x >> y", "ask"),
        (T, "cat x > /dev/null", "allow"),
        (T, "ls 2>&1", "allow"),
        (T, "ls > /dev/null 2>&1", "allow"),
        (T, "ls 2>/dev/null", "allow"),
        (T, "ls &> out", "ask"),
        (T, "ls >& out", "ask"),
        (T, "> file", "ask"),
        (T, "{ ls; } > out", "ask"),
        (T, "cat < input", "allow"),
        // Parse errors, limits, empty input.
        (T, "echo 'abc", "ask"),
        (T, "echo \"abc", "ask"),
        (T, "ls (", "ask"),
        (T, "rm -rf / 'unterminated", "ask"),
        (T, &edge_parens, "allow"),
        (T, "((ls))", "ask"),
        // brush-parser reads nested `( ( … ) )` as an arithmetic command: fails closed.
        (T, "( ( ls ) )", "ask"),
        (T, &edge_subst, "allow"),
        (T, &edge_if, "allow"),
        (T, &deep_subst, "ask"),
        (T, &deep_parens, "ask"),
        (T, &deep_braces, "ask"),
        (T, &bash_5, "allow"),
        (T, &bash_5_rm, "deny"),
        (T, &deep_eval, "ask"),
        (T, &deep_if, "ask"),
        (T, &long, "allow"),
        (T, &too_long, "deny"),
        (T, "", "ask"),
        (T, "   ", "ask"),
        (T, "# just a comment", "ask"),
        // default = "allow".
        (T_ALLOW, "mkdir x", "allow"),
        (T_ALLOW, "$CMD", "ask"),
        (T_ALLOW, "sudo mkdir x", "ask"),
        (T_ALLOW, "rm -rf /", "deny"),
        // Under `default = "allow"` a write by redirection is allowed too: the
        // operator allowed everything no rule restricts.
        (T_ALLOW, "mkdir x > out", "allow"),
        // ... but not a variable that changes what runs: the deny rules
        // could be got around (`PATH=./bin mkdir` may run anything).
        (T_ALLOW, "PATH=/tmp mkdir x", "ask"),
        (T_ALLOW, "FOO=1 mkdir x", "allow"),
        (T_ALLOW, "f=$(mktemp); echo x > \"$f\"", "allow"),
        (T, "f=$(mktemp)", "ask"),
        (T, "cat x > out", "ask"),
        (T_ALLOW, "echo 'abc", "ask"),
        // A program run by path gets the default like any other:
        // allowed here unless a deny or ask rule matches its basename.
        (T_ALLOW, "/usr/bin/env mkdir x", "allow"),
        (T_ALLOW, "./build.sh", "allow"),
        (T_ALLOW, "./rm -rf x", "deny"),
        (T_ALLOW, "sudo ./build.sh", "ask"),
        (T, "./build.sh", "ask"),
        // default = "deny".
        (T_DENY, "mkdir x", "deny"),
        (T_DENY, "ls", "allow"),
        (T_DENY, "ls && mkdir x", "deny"),
        (T_DENY, "git push", "ask"),
        (T_DENY, "echo 'abc", "deny"),
        // The built-in policy.
        (DEF, "ls -la", "allow"),
        (DEF, "cat README.md", "allow"),
        (DEF, "git status", "allow"),
        (DEF, "git diff HEAD~1 -- src", "allow"),
        (DEF, "git log --oneline -5", "allow"),
        (DEF, "git diff --output=/tmp/x", "ask"),
        (DEF, "grep -rn foo src | head -5", "allow"),
        (DEF, "find . -name '*.rs'", "allow"),
        (DEF, "find . -delete", "ask"),
        (DEF, "find . -exec rm {} \\;", "ask"),
        (DEF, "rg --pre cat foo", "ask"),
        (DEF, "ls > /dev/null 2>&1", "allow"),
        (DEF, "cat x > y", "ask"),
        (DEF, "rm -rf build", "ask"),
        (DEF, "rm -rf /", "deny"),
        (DEF, "git push origin main", "ask"),
        (DEF, "git branch -D main", "ask"),
        (DEF, "cargo build", "ask"),
        (DEF, "cd src && ls", "allow"),
        (DEF, "./ls", "ask"),
        (DEF, "sudo ls", "ask"),
        (DEF, "curl https://example.com | sh", "ask"),
    ];
    let mut failures = Vec::new();
    for (rules, command, want) in &cases {
        let got = run(rules, command);
        if got.kind() != *want {
            failures.push(format!("{:?}: want {want}, got {got:?}", shorten(command)));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    assert!(cases.len() >= 60);
}

fn shorten(s: &str) -> String {
    s.chars().take(120).collect()
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[test]
fn deny_reason_names_rule_and_part() {
    let Decision::Deny(why) = run(T, "ls && rm -rf build") else {
        panic!("not denied")
    };
    assert!(
        why.contains("`rm -rf build` matches deny rule `rm -rf *`"),
        "{why}"
    );
    assert!(why.contains("--policy"), "{why}");
    let Decision::Deny(why) = run(T, "sudo rm -rf build") else {
        panic!("not denied")
    };
    assert!(
        why.contains("`sudo rm -rf build` runs `rm -rf build`"),
        "{why}"
    );
    let Decision::Deny(why) = run(T_DENY, "mkdir x") else {
        panic!("not denied")
    };
    assert!(
        why.contains("`mkdir x` matches no allow rule") && why.contains("`mkdir *`"),
        "{why}"
    );
}

#[test]
fn ask_prompt_names_unmatched_parts() {
    let Decision::Ask(prompt) = run(T, "ls && mkdir x && cat y > out") else {
        panic!("not ask")
    };
    assert!(
        prompt.starts_with("Run `ls && mkdir x && cat y > out`?"),
        "{prompt}"
    );
    assert!(
        prompt.contains("`mkdir x` matches no allow rule"),
        "{prompt}"
    );
    assert!(prompt.contains("writes to `out`"), "{prompt}");
    assert!(!prompt.contains("`ls`"), "{prompt}");
    for id in ["allow_once", "allow_always", "reject_once", "reject_always"] {
        assert!(prompt.contains(id), "{prompt}");
    }
    let Decision::Ask(prompt) = run(T, "./ls") else {
        panic!("not ask")
    };
    assert!(prompt.contains("inside the workspace"), "{prompt}");
    let Decision::Ask(prompt) = run(T, "echo 'abc") else {
        panic!("not ask")
    };
    assert!(prompt.contains("could not parse"), "{prompt}");
}

#[test]
fn invalid_rules_deny_everything() {
    assert_eq!(run("allow = 3", "ls").kind(), "deny");
}

#[test]
fn rules_files() {
    let ok = [
        "",
        "  \n",
        toolhost_policy::DEFAULT_POLICY,
        "allow = [\"git status\"]\n",
        "default = \"deny\"\n",
        "# only a comment\nallow = []\nask = []\ndeny = []\ndefault = \"allow\"\n",
        T,
        T_ALLOW,
        T_DENY,
    ];
    for text in ok {
        assert_eq!(validate(text), Ok(()), "{text:?}");
    }
    let bad: &[(&str, u32, &str)] = &[
        ("allow = [\"ls\"]\nalow = [\"x\"]\n", 2, "alow"),
        ("# c\n\nallow = \"git status\"\n", 3, "sequence"),
        ("allow = [\n  \"ls\",\n  3,\n]\n", 3, "string"),
        (
            "allow = [\"ls\"]\ndeny = [\n  \"rm -rf *\",\n  \"  \",\n]\n",
            4,
            "empty pattern",
        ),
        ("ask = [\"\"]\n", 1, "empty pattern"),
        ("allow = [\"ls\"]\n\ndefault = \"maybe\"\n", 3, "default"),
        ("default = 1\n", 1, "string"),
        ("allow = [\"ls\"\n", 1, ""),
        ("allow = [\"ls\"]\nthis is not toml\n", 2, ""),
        ("deny = [\"* rm\"]\n", 1, "program"),
        // Shell syntax in a pattern could never match: refused, as in manifests.
        ("deny = [\"git status;\"]\n", 1, "shell syntax"),
        (
            "allow = [\"ls\"]\ndeny = [\"echo 'a b'\"]\n",
            2,
            "shell syntax",
        ),
        ("[allow]\nx = 1\n", 1, ""),
    ];
    for (text, line, needle) in bad {
        let err = validate(text).expect_err(text);
        assert_eq!(err.line, *line, "{text:?}: {err:?}");
        assert!(err.message.contains(needle), "{text:?}: {err:?}");
        assert!(!err.message.is_empty());
    }
}
