//! The state dir is private to the host user whatever the umask the host was
//! started with (docs/operations.md#the-state-dir): every directory the
//! host creates there is `0700`, every file `0600`, and a state dir left with
//! looser modes is tightened with a warning.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};

use crate::support::describe;

/// `toolhost ARGS` started by `sh` after `umask 022` (what a login shell
/// usually has), with `TOOLHOST_LOG` unset.
fn under_umask_022(args: &[&str]) -> Output {
    Command::new("/bin/sh")
        .arg("-c")
        .arg("umask 022 && exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_toolhost"))
        .args(args)
        .env_remove("TOOLHOST_LOG")
        .output()
        .expect("running toolhost")
}

/// Every entry under `root` (itself included, as ""), with its kind (`d`,
/// `f`, `s`ocket; symbolic links, whose mode means nothing, left out) and its
/// permission bits.
fn modes(root: &Path) -> Vec<(String, char, u32)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, char, u32)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let t = meta.file_type();
            let kind = if t.is_dir() {
                'd'
            } else if t.is_file() {
                'f'
            } else if t.is_socket() {
                's'
            } else {
                continue;
            };
            out.push((rel, kind, meta.mode() & 0o7777));
            if t.is_dir() {
                walk(root, &path, out);
            }
        }
    }
    let mut out = vec![(
        String::new(),
        'd',
        std::fs::metadata(root).unwrap().mode() & 0o7777,
    )];
    walk(root, root, &mut out);
    out.sort();
    out
}

#[test]
fn everything_the_host_creates_in_the_state_dir_is_private_under_umask_022() {
    let (ws, base) = crate::support::dirs();
    // Two levels the host creates itself.
    let state = base.path().join("new/state");
    let state_arg = state.to_str().unwrap();
    let ws_arg = ws.path().to_str().unwrap();
    let policy = crate::support::allow_all_policy(ws.path());
    let plugin_src = tempfile::tempdir().unwrap();
    let wasm = plugin_src.path().join("example.wasm");
    let fixture = crate::repo::root().join("tests/fixtures/compat/v0.1.0/example.wasm");
    std::fs::copy(&fixture, &wasm).unwrap();
    std::fs::copy(fixture.with_extension("toml"), wasm.with_extension("toml")).unwrap();

    let runs: [&[&str]; 4] = [
        &[
            "call",
            "bash",
            r#"{"command":"echo out; echo scratch > \"$TMPDIR/f\"","run_in_background":true}"#,
        ],
        &["call", "bash", r#"{"command":"echo foreground"}"#],
        // stdin is empty: serve ends at once, leaving its event log.
        &["serve"],
        &["plugin", "add", wasm.to_str().unwrap()],
    ];
    for args in runs {
        let mut all = args.to_vec();
        if args[0] != "plugin" {
            all.extend(["--workspace", ws_arg, "--policy", &policy]);
        }
        all.extend(["--state-dir", state_arg]);
        let out = under_umask_022(&all);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", describe(&out));
    }

    let found = modes(&state);
    let loose: Vec<_> = found
        .iter()
        .filter(|(path, kind, mode)| {
            let want = match (kind, path.as_str()) {
                (_, "sandbox/mask") => 0o000,
                ('d', _) => 0o700,
                _ => 0o600,
            };
            *mode != want
        })
        .collect();
    assert_eq!(loose, Vec::<&(String, char, u32)>::new(), "in {found:#?}");
    assert_eq!(
        std::fs::metadata(base.path().join("new")).unwrap().mode() & 0o7777,
        0o700
    );
    // What the runs made is all there, so each kind was checked.
    let has = |pred: &dyn Fn(&str) -> bool| found.iter().any(|(p, _, _)| pred(p));
    for (what, pred) in [
        (
            "an output log",
            &(|p: &str| p.starts_with("sessions/") && p.ends_with("/output.log"))
                as &dyn Fn(&str) -> bool,
        ),
        ("an event log", &|p: &str| {
            p.starts_with("hosts/hs_") && p.ends_with("/events.jsonl")
        }),
        ("the owners dir", &|p: &str| p == "owners"),
        ("compiled code", &|p: &str| {
            p.starts_with("compiled/") && p.ends_with(".cwasm")
        }),
        ("an installed plugin", &|p: &str| {
            p == "plugins/example_rust.wasm"
        }),
        ("its manifest", &|p: &str| p == "plugins/example_rust.toml"),
        ("the mask", &|p: &str| p == "sandbox/mask"),
    ] {
        assert!(has(pred), "no {what} in {found:#?}");
    }

    // A state dir an earlier run (or a person) left readable is tightened,
    // with a warning naming the old mode.
    for dir in [&state, &state.join("sessions")] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = under_umask_022(&[
        "call",
        "bash",
        r#"{"command":"true"}"#,
        "--workspace",
        ws_arg,
        "--policy",
        &policy,
        "--state-dir",
        state_arg,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for dir in [state.clone(), state.join("sessions")] {
        assert_eq!(
            std::fs::metadata(&dir).unwrap().mode() & 0o7777,
            0o700,
            "{}",
            dir.display()
        );
        let warning = format!(
            "{} had mode 0755, so other users could read what it holds; made 0700",
            dir.display()
        );
        assert!(stderr.contains(&warning), "no `{warning}` in {stderr}");
    }
}
