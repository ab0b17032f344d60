//! Policy honesty: programs that run other programs cannot
//! carry a denied command past a deny list under `default = "allow"`, the
//! built-in allow list does not cover writes behind flags, an empty and a
//! comment-only policy file mean the same, and a program run by path gets
//! the default like any other.

use toolhost_policy::{Decision, Request, Rules, decide, validate};

/// A deny list under `default = "allow"`: the setting the bypasses target.
const DENY_RM: &str = "default = \"allow\"\ndeny = [\"rm *\"]\n";
/// `default = "allow"` and nothing restricted: nothing to get around.
const ALLOW_ALL: &str = "default = \"allow\"\n";
/// An explicit allow rule for an interpreter, next to a deny list.
const PY_RULE: &str = "allow = [\"python3 *\", \"ls *\"]\ndeny = [\"rm *\"]\n";
/// `default = "ask"` with the program run by path unnamed.
const ASK: &str = "default = \"ask\"\nallow = [\"ls *\"]\n";
/// The built-in policy.
const DEF: &str = "";

fn run(rules: &str, command: &str) -> Decision {
    decide(
        rules,
        &Request {
            command: command.to_string(),
            cwd: "/ws".to_string(),
            workspace: "/ws".to_string(),
            ..Request::default()
        },
    )
}

fn check(cases: &[(&str, &str, &str)]) {
    let mut failures = Vec::new();
    for (rules, command, want) in cases {
        let got = run(rules, command);
        if got.kind() != *want {
            failures.push(format!(
                "{command:?} under {rules:?}: want {want}, got {got:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Every way to run `rm` through another program, under `deny = ["rm *"]`
/// and `default = "allow"`: denied when the policy can see the `rm`, asked
/// when it cannot, never allowed.
const BYPASSES: &[(&str, &str)] = &[
    // find
    ("find . -exec rm {} \\;", "deny"),
    ("find . -name '*.o' -exec rm -f {} +", "deny"),
    ("find . -execdir rm {} \\;", "deny"),
    ("find . -ok rm {} \\;", "deny"),
    ("find . -okdir rm {} ';'", "deny"),
    ("find . -exec ls {} \\; -exec rm {} \\;", "deny"),
    ("find . -exec rm + -rf / {} \\;", "deny"),
    ("find . -exec sh -c 'rm \"$1\"' _ {} \\;", "deny"),
    ("find . -exec {} \\;", "ask"),
    ("find . $ACTION rm {} \\;", "ask"),
    ("find . \"$A\"", "ask"),
    ("find . -exec timeout 5 rm {} +", "deny"),
    ("find . -exec find . -exec rm {} + \\;", "deny"),
    // xargs
    ("xargs rm", "deny"),
    ("ls | xargs -0 -n1 rm -f", "deny"),
    ("xargs -I{} sh -c 'rm {}'", "deny"),
    ("xargs $OPT rm", "ask"),
    // trap
    ("trap 'rm x' EXIT", "deny"),
    ("trap -- 'rm -f x' EXIT INT", "deny"),
    ("trap \"ls; rm x\" EXIT", "deny"),
    ("trap \"$CMD\" EXIT", "ask"),
    // flock
    ("flock f rm x", "deny"),
    ("flock -n -w 5 /tmp/lock rm x", "deny"),
    ("flock --timeout 5 f rm x", "deny"),
    ("flock f -c 'rm x'", "deny"),
    ("flock -x f --command 'ls; rm x'", "deny"),
    ("flock f $CMD", "ask"),
    // git aliases and settings
    ("git -c alias.x='!rm x' x", "deny"),
    ("git -c 'alias.x=!rm' x -rf y", "deny"),
    ("git -c alias.x=!sh x -c 'rm y'", "ask"),
    ("git -c alias.st=push st", "ask"),
    ("git -c core.pager='rm x' log", "ask"),
    ("git -c core.sshCommand='rm x' fetch", "ask"),
    ("git -c core.editor='rm x' commit", "ask"),
    ("git -c diff.external=./x diff", "ask"),
    ("git -c include.path=./evil log", "ask"),
    ("git --config-env=core.pager=P log", "ask"),
    ("git -c \"$X\" log", "ask"),
    ("git --exec-path=./bin status", "ask"),
    ("git -c init.templateDir=./t init", "ask"),
    ("git -c core.hooksPath=./h commit -m x", "ask"),
    // shells (parsed again: the inner command is judged)
    ("sh -c 'rm x'", "deny"),
    ("bash -c 'ls && rm x'", "deny"),
    ("bash -lc \"rm x\"", "deny"),
    ("sh -c \"$CMD\"", "ask"),
    ("sh -c 'rm x'\"'\"", "ask"),
    ("eval 'rm x'", "deny"),
    // interpreters' inline code (not readable: asked)
    ("python3 -c 'import os; os.system(\"rm x\")'", "ask"),
    ("python -c 'print(1)'", "ask"),
    ("python3.12 -Ic 'import shutil'", "ask"),
    ("python3 -W ignore -c 'x'", "ask"),
    ("python3 $FLAG 'x'", "ask"),
    ("perl -e 'unlink \"x\"'", "ask"),
    ("perl -ne 'print' f", "ask"),
    ("perl -Mstrict -E 'say 1'", "ask"),
    ("ruby -e 'File.delete(\"x\")'", "ask"),
    ("node -e 'require(\"fs\").rmSync(\"x\")'", "ask"),
    ("node --require ./x.js --eval 'x'", "ask"),
    ("node -pe 1", "ask"),
    ("php -r 'unlink(\"x\");'", "ask"),
    ("lua -e 'os.remove(\"x\")'", "ask"),
    ("deno eval 'Deno.removeSync(\"x\")'", "ask"),
    ("awk 'BEGIN { system(\"rm x\") }'", "ask"),
    ("awk '{ print | \"sh\" }' f", "ask"),
    ("gawk -e 'BEGIN { system(\"rm x\") }'", "ask"),
    ("awk -l ./ext.so 1", "ask"),
    ("awk \"$PROG\" f", "ask"),
    ("timeout 5 python3 -c 'x'", "ask"),
    ("env python3 -c 'x'", "ask"),
    // environment that changes what runs
    ("LD_PRELOAD=./evil.so ls", "ask"),
    ("PATH=./bin ls", "ask"),
    ("env BASH_ENV=./x.sh bash -c ls", "ask"),
    ("GIT_PAGER='rm x' git log", "ask"),
    // wrappers as before
    ("timeout 5 rm x", "deny"),
    ("nice -n 5 nohup env rm x", "deny"),
    ("sudo rm x", "deny"),
];

#[test]
fn programs_that_run_programs_cannot_carry_a_denied_command() {
    let cases: Vec<(&str, &str, &str)> = BYPASSES
        .iter()
        .map(|(command, want)| (DENY_RM, *command, *want))
        .collect();
    check(&cases);
    // The same commands are never allowed under the built-in policy either.
    for (command, _) in BYPASSES {
        assert_ne!(
            run(DEF, command).kind(),
            "allow",
            "{command} under the built-in policy"
        );
    }
}

#[test]
fn what_they_run_is_allowed_when_it_is_allowed() {
    check(&[
        (DENY_RM, "find . -exec ls {} \\;", "allow"),
        (
            DENY_RM,
            "find . -name '*.rs' -exec grep -l foo {} +",
            "allow",
        ),
        (DENY_RM, "find . -name '*.rs'", "allow"),
        (DENY_RM, "xargs ls", "allow"),
        (DENY_RM, "trap 'ls' EXIT", "allow"),
        (DENY_RM, "trap - EXIT", "allow"),
        (DENY_RM, "trap EXIT", "allow"),
        (DENY_RM, "trap -p", "allow"),
        (DENY_RM, "flock f ls", "allow"),
        (DENY_RM, "flock 9", "allow"),
        (DENY_RM, "flock f -c 'ls'", "allow"),
        (DENY_RM, "git -c alias.x='!ls' x", "allow"),
        (
            DENY_RM,
            "git -c color.ui=never -c core.quotepath=off log",
            "allow",
        ),
        (
            DENY_RM,
            "git -C sub -c user.name=x -c user.email=y commit -m x",
            "allow",
        ),
        (DENY_RM, "sh -c 'ls'", "allow"),
        (DENY_RM, "awk '{ print $1 }' f", "allow"),
        (DENY_RM, "awk -F: -f prog.awk f", "allow"),
        (DENY_RM, "python3 script.py -c x", "allow"),
        (DENY_RM, "python3 -m pytest -c x", "allow"),
        (DENY_RM, "perl script.pl -e", "allow"),
        (DENY_RM, "LANG=C FOO=1 ls", "allow"),
        // With nothing restricted there is nothing to get around.
        (ALLOW_ALL, "python3 -c 'print(1)'", "allow"),
        (ALLOW_ALL, "git -c core.pager=less log", "allow"),
        (ALLOW_ALL, "LD_PRELOAD=./x.so ls", "allow"),
        (ALLOW_ALL, "find . $X", "allow"),
        // A parse error in a shell string is asked even so.
        (ALLOW_ALL, "sh -c 'echo \"abc'", "ask"),
        // An explicit interpreter rule does not outrank the deny list: the
        // code may do what the deny rules refuse.
        (PY_RULE, "python3 -c 'print(1)'", "ask"),
        (PY_RULE, "python3 script.py", "allow"),
        (PY_RULE, "find . -exec ls {} +", "ask"),
    ]);
}

#[test]
fn the_ask_names_what_the_policy_cannot_read() {
    let Decision::Ask(prompt) = run(DENY_RM, "python3 -c 'x'") else {
        panic!("not an ask")
    };
    assert!(
        prompt.contains("`python3 -c` runs code this policy cannot read"),
        "{prompt}"
    );
    assert!(prompt.contains("deny rules like `rm *`"), "{prompt}");
    let Decision::Deny(why) = run(DENY_RM, "find . -exec rm {} \\;") else {
        panic!("not denied")
    };
    assert!(why.contains("`rm {}` matches deny rule `rm *`"), "{why}");
}

#[test]
fn default_allow_list_does_not_cover_writes_behind_flags() {
    check(&[
        // `file -C` compiles a magic file (writes `*.mgc`).
        (DEF, "file x", "allow"),
        (DEF, "file -b x", "allow"),
        (DEF, "file -C -m magic", "ask"),
        (DEF, "file -bC -m magic", "ask"),
        (DEF, "file --compile -m magic", "ask"),
        // `tree -o FILE` writes; `tree -R` writes 00Tree.html files.
        (DEF, "tree -L 2 src", "allow"),
        (DEF, "tree -o out", "ask"),
        (DEF, "tree -ao out", "ask"),
        (DEF, "tree -R -H . src", "ask"),
        // find's own writes.
        (DEF, "find . -name '*.rs'", "allow"),
        (DEF, "find . -delete", "ask"),
        (DEF, "find . -fprint out", "ask"),
        (DEF, "find . -fprint0 out", "ask"),
        (DEF, "find . -fprintf out %p", "ask"),
        (DEF, "find . -fls out", "ask"),
        (DEF, "find . -exec grep -l foo {} +", "allow"),
        (DEF, "find . -exec rm {} \\;", "ask"),
        (DEF, "find . -exec sed -i s/a/b/ {} +", "ask"),
        // sort/uniq are allowed only without arguments.
        (DEF, "sort", "allow"),
        (DEF, "sort -o out in", "ask"),
        (DEF, "sort --output=out in", "ask"),
        (DEF, "uniq -c", "allow"),
        (DEF, "uniq in out", "ask"),
        // date is allowed only to print.
        (DEF, "date", "allow"),
        (DEF, "date +%s", "allow"),
        (DEF, "date -s 2020-01-01", "ask"),
        (DEF, "date --set=2020-01-01", "ask"),
        (DEF, "date +%s -s 2020-01-01", "ask"),
        // Not on the allow list at all.
        (DEF, "sed -i s/a/b/ f", "ask"),
        (DEF, "sed -n 1p f", "ask"),
        (DEF, "tee f", "ask"),
        (DEF, "ls | tee f", "ask"),
        (DEF, "split -l 10 f", "ask"),
        (DEF, "tar -xf a.tar", "ask"),
        (DEF, "tar xf a.tar", "ask"),
        (DEF, "touch f", "ask"),
        (DEF, "mkdir d", "ask"),
        (DEF, "ln -s a b", "ask"),
        (DEF, "hostname evil", "ask"),
        // rg runs programs with `--pre` and `--hostname-bin`.
        (DEF, "rg foo src", "allow"),
        (DEF, "rg --pre ./x foo", "ask"),
        (DEF, "rg --hostname-bin=./x foo", "ask"),
        // git: only reading forms are allowed.
        (DEF, "git diff --output=x", "ask"),
        (DEF, "git log --output x", "ask"),
        (DEF, "git show --output=x HEAD", "ask"),
        (DEF, "git branch", "allow"),
        (DEF, "git branch -D x", "ask"),
        (DEF, "git branch x", "ask"),
        (DEF, "git branch -m x y", "ask"),
        (DEF, "git tag", "allow"),
        (DEF, "git tag v1", "ask"),
        (DEF, "git tag -d v1", "ask"),
        (DEF, "git stash", "ask"),
        (DEF, "git stash list", "allow"),
        (DEF, "git stash drop", "ask"),
        (DEF, "git commit -m x", "ask"),
        (DEF, "git add .", "ask"),
        (DEF, "git checkout x", "ask"),
        (DEF, "git remote add x y", "ask"),
        (DEF, "git config user.name x", "ask"),
        (DEF, "git -c core.pager=./x log", "ask"),
        (DEF, "git -c core.pager=./x status", "ask"),
        // Printing is fine; redirections are effects (asked).
        (DEF, "echo hi", "allow"),
        (DEF, "echo hi > f", "ask"),
        (DEF, "printf '%s' x >> f", "ask"),
    ]);
}

#[test]
fn an_empty_and_a_comment_only_policy_mean_the_same() {
    let comment_only = "# my policy\n\n  # nothing set yet\n# default = \"allow\"\n";
    assert_eq!(validate(""), Ok(()));
    assert_eq!(validate(comment_only), Ok(()));
    let (empty, commented) = (
        Rules::parse("").unwrap(),
        Rules::parse(comment_only).unwrap(),
    );
    assert_eq!(empty.default, commented.default);
    let words = |r: &Rules| {
        [&r.allow, &r.ask, &r.deny].map(|l| l.iter().map(|p| p.to_string()).collect::<Vec<_>>())
    };
    assert_eq!(words(&empty), words(&commented));
    assert!(!empty.allow.is_empty(), "both are the built-in policy");
    for command in [
        "ls -la",
        "rm -rf /",
        "rm x",
        "cargo build",
        "git status",
        "python3 -c x",
    ] {
        assert_eq!(
            run("", command),
            run(comment_only, command),
            "{command}: empty and comment-only policies differ"
        );
        assert_eq!(run("\n\n", command), run("", command), "{command}");
    }
    // A file that sets something is that policy, not the built-in one.
    assert_eq!(run("# c\ndefault = \"deny\"\n", "ls").kind(), "deny");
}

#[test]
fn a_program_run_by_path_gets_the_default() {
    check(&[
        (ALLOW_ALL, "./run.sh", "allow"),
        (ALLOW_ALL, "bin/tool --x", "allow"),
        (ALLOW_ALL, "/ws/run.sh", "allow"),
        (ALLOW_ALL, "/usr/bin/env ./run.sh", "allow"),
        (ALLOW_ALL, "/bin/bash -c ./run.sh", "allow"),
        (DENY_RM, "./run.sh", "allow"),
        (DENY_RM, "./rm x", "deny"),
        (DENY_RM, "/bin/rm x", "deny"),
        (DENY_RM, "sudo ./run.sh", "ask"),
        // Under `default = "ask"` it is still asked, and only a rule that
        // spells out the path allows it.
        (ASK, "./run.sh", "ask"),
        (ASK, "./ls", "ask"),
        ("allow = [\"./run.sh *\"]\n", "./run.sh --all", "allow"),
        (DEF, "./run.sh", "ask"),
    ]);
}

#[test]
fn long_chains_of_programs_running_programs_stay_bounded() {
    let finds = format!("find . {}rm {{}} \\;", "-exec find . ".repeat(5_000));
    let aliases = format!(
        "git {}-c alias.y='!rm x' x",
        "-c alias.x='!ls' ".repeat(40_000)
    );
    let traps = "trap 'trap \"trap ls EXIT\" EXIT' EXIT; ".repeat(10_000) + "trap 'rm x' EXIT";
    let started = std::time::Instant::now();
    // Nesting deeper than `shell::MAX_DEPTH` is asked unchecked.
    for (command, want) in [(&finds, "ask"), (&aliases, "deny"), (&traps, "deny")] {
        assert!(command.len() < 1 << 20);
        let got = run(DENY_RM, command);
        assert_eq!(got.kind(), want, "{}", &command[..80]);
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}
