//! Exec sandbox tests with real commands (`/bin/sh`, coreutils, python3, curl if present).
//!
//! Every test builds its own temp tree:
//! `root/{ws/{.git/HEAD, file.txt, state-inside/}, tmp/, outside/, state/}` and spawns commands
//! with `current_dir(ws)`. Network tests only ever contact a loopback listener the test owns.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use toolhost_process::{
    Confinement, EffectiveSandbox, SandboxError, SandboxMode, SandboxPaths, SandboxPolicy,
    denial_hint, probe_kernel,
};

struct Fx {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    tmp: PathBuf,
    outside: PathBuf,
    state_outside: PathBuf,
    state_inside: PathBuf,
}

impl Fx {
    fn new() -> Fx {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("ws");
        let outside = root.join("outside");
        let state_outside = root.join("state");
        let state_inside = ws.join("state-inside");
        for d in [
            &ws,
            &outside,
            &state_outside,
            &state_inside,
            &ws.join(".git"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(ws.join("file.txt"), "hello from the workspace\n").unwrap();
        std::fs::write(outside.join("target.txt"), "original\n").unwrap();
        std::fs::write(state_outside.join("session-1.log"), "log\n").unwrap();
        std::fs::write(state_inside.join("session-2.log"), "log\n").unwrap();
        Fx {
            _dir: dir,
            tmp: root.join("tmp"),
            root,
            ws,
            outside,
            state_outside,
            state_inside,
        }
    }

    fn paths(&self) -> SandboxPaths {
        SandboxPaths {
            workspace: self.ws.clone(),
            private_tmp: self.tmp.clone(),
            protected: vec![self.state_outside.clone(), self.state_inside.clone()],
            hidden: Vec::new(),
            ..Default::default()
        }
    }

    fn prepare(&self, policy: &SandboxPolicy) -> Confinement {
        policy.prepare(&self.paths()).expect("prepare")
    }

    /// Runs `sh -c script` in the workspace under `policy`.
    fn sh(&self, policy: &SandboxPolicy, script: &str) -> Output {
        let conf = self.prepare(policy);
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(script).current_dir(&self.ws);
        conf.install(&mut cmd);
        cmd.output().expect("spawn")
    }
}

fn policy(mode: SandboxMode) -> SandboxPolicy {
    SandboxPolicy {
        mode,
        ..SandboxPolicy::default()
    }
}

fn ww() -> SandboxPolicy {
    SandboxPolicy::default()
}

fn text(o: &Output) -> String {
    format!(
        "status={:?}\nstdout={}\nstderr={}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[track_caller]
fn assert_ok(o: &Output) {
    assert!(o.status.success(), "expected success:\n{}", text(o));
}

/// Non-zero exit and the kernel's error text (not a parser's) in stderr.
#[track_caller]
fn assert_refused(o: &Output, errno_text: &str) {
    assert!(!o.status.success(), "expected failure:\n{}", text(o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(errno_text),
        "expected {errno_text:?} in stderr:\n{}",
        text(o)
    );
}

/// What a write outside the writable roots fails with: `EROFS` where the kernel lets
/// the sandbox mount `/` read-only (checked before Landlock's `EACCES`), else `EACCES`.
fn outside_refusal() -> &'static str {
    if probe_kernel().read_only_root {
        "Read-only file system"
    } else {
        "Permission denied"
    }
}

fn q(p: &Path) -> String {
    format!("'{}'", p.display())
}

fn is_root() -> bool {
    // SAFETY: getuid never fails.
    unsafe { libc::getuid() == 0 }
}

// ---------------------------------------------------------------- pure functions

#[test]
fn mode_parse_display_default() {
    for (s, m) in [
        ("read-only", SandboxMode::ReadOnly),
        ("workspace-write", SandboxMode::WorkspaceWrite),
        ("full-access", SandboxMode::FullAccess),
    ] {
        assert_eq!(s.parse::<SandboxMode>().unwrap(), m);
        assert_eq!(m.to_string(), s);
        assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{s}\""));
    }
    assert!(matches!(
        "readonly".parse::<SandboxMode>(),
        Err(SandboxError::UnknownMode(_))
    ));
    assert_eq!(SandboxMode::default(), SandboxMode::WorkspaceWrite);
    assert_eq!(
        SandboxPolicy::default(),
        SandboxPolicy {
            mode: SandboxMode::WorkspaceWrite,
            network: false,
            unix_sockets: false,
            git_writable: false
        }
    );
}

#[test]
fn stricter_table() {
    use SandboxMode::*;
    let p = |mode, network, git_writable| SandboxPolicy {
        mode,
        network,
        unix_sockets: network,
        git_writable,
    };
    let table = [
        // (a, b, expected)
        (
            p(ReadOnly, false, false),
            p(FullAccess, true, true),
            p(ReadOnly, false, false),
        ),
        (
            p(ReadOnly, true, true),
            p(WorkspaceWrite, true, true),
            p(ReadOnly, true, true),
        ),
        (
            p(WorkspaceWrite, true, false),
            p(FullAccess, true, true),
            p(WorkspaceWrite, true, false),
        ),
        (
            p(FullAccess, true, true),
            p(FullAccess, false, true),
            p(FullAccess, false, true),
        ),
        (
            p(FullAccess, false, false),
            p(FullAccess, false, false),
            p(FullAccess, false, false),
        ),
        (
            p(WorkspaceWrite, false, true),
            p(WorkspaceWrite, true, true),
            p(WorkspaceWrite, false, true),
        ),
        (
            p(WorkspaceWrite, true, true),
            p(ReadOnly, true, false),
            p(ReadOnly, true, false),
        ),
    ];
    for (a, b, want) in table {
        assert_eq!(a.stricter(&b), want, "{a:?} vs {b:?}");
        assert_eq!(b.stricter(&a), want, "commutative: {b:?} vs {a:?}");
        assert_eq!(a.stricter(&a), a, "idempotent");
    }
}

fn eff(mode: SandboxMode) -> EffectiveSandbox {
    let confined = mode != SandboxMode::FullAccess;
    EffectiveSandbox {
        mode,
        network_blocked: confined,
        unix_sockets_blocked: confined,
        landlock_abi: confined.then_some(7),
        git_read_only: mode == SandboxMode::WorkspaceWrite,
        writable: match mode {
            SandboxMode::ReadOnly => vec!["/dev/null".into()],
            SandboxMode::WorkspaceWrite => {
                vec!["/w".into(), "/t".into(), "/dev/null".into()]
            }
            SandboxMode::FullAccess => vec!["/".into()],
        },
        protected: if confined {
            vec!["/state".into()]
        } else {
            vec![]
        },
        read_denied: vec![],
        metadata_read_only: confined,
        setid_refused: confined,
        warnings: vec![],
    }
}

#[test]
fn denial_hint_table() {
    use SandboxMode::*;
    let cases: &[(SandboxMode, Option<i32>, &str, Option<&str>)] = &[
        (
            WorkspaceWrite,
            Some(1),
            "touch: cannot touch '/x': Permission denied",
            Some(
                "writes outside /w and /t are blocked by the workspace-write sandbox; ask the operator for --sandbox full-access",
            ),
        ),
        (
            WorkspaceWrite,
            None,
            "sh: 1: cannot create /etc/x: Permission denied",
            Some("--sandbox full-access"),
        ),
        (WorkspaceWrite, Some(0), "Permission denied", None),
        (FullAccess, Some(1), "Permission denied", None),
        (WorkspaceWrite, Some(1), "No such file or directory", None),
        (
            WorkspaceWrite,
            Some(1),
            "touch: cannot touch '.git/x': Read-only file system",
            Some(
                "/w/.git is read-only under the workspace-write sandbox; ask the operator to grant .git writes",
            ),
        ),
        (
            WorkspaceWrite,
            Some(1),
            "sh: 1: cannot create /state/s.log: Permission denied",
            Some("/state is host state"),
        ),
        (
            ReadOnly,
            Some(1),
            "touch: cannot touch 'a': Permission denied",
            Some(
                "the read-only sandbox blocks all writes except /dev/null; ask the operator for --sandbox workspace-write",
            ),
        ),
        (
            ReadOnly,
            Some(1),
            "PermissionError: [Errno 1] Operation not permitted\n  File \"<string>\", line 1, in <module>\n    import socket; socket.create_connection",
            Some(
                "network is blocked by the sandbox (every socket(2) is refused; a UNIX socket needs --allow-unix-sockets); needs --allow-network",
            ),
        ),
        (
            WorkspaceWrite,
            Some(1),
            "Cannot connect to the Docker daemon: dial unix /var/run/docker.sock: socket: operation not permitted",
            Some("UNIX sockets are blocked by the sandbox"),
        ),
        (
            WorkspaceWrite,
            Some(2),
            "Error connecting to agent: Operation not permitted",
            Some("needs --allow-unix-sockets"),
        ),
        (
            WorkspaceWrite,
            Some(1),
            "    s.connect('/run/user/0/app.sock')\nPermissionError: [Errno 1] Operation not permitted",
            Some("needs --allow-unix-sockets"),
        ),
        (
            WorkspaceWrite,
            Some(7),
            "curl: (7) Failed to connect to 127.0.0.1 port 80 after 0 ms: Could not connect to server",
            Some("needs --allow-network"),
        ),
        (
            WorkspaceWrite,
            Some(6),
            "curl: (6) Could not resolve host: example.com",
            Some("needs --allow-network"),
        ),
        (
            WorkspaceWrite,
            Some(1),
            "Temporary failure in name resolution",
            Some("needs --allow-network"),
        ),
    ];
    for (mode, code, out, want) in cases {
        let got = denial_hint(&eff(*mode), *code, out);
        match (want, &got) {
            (None, None) => {}
            (Some(w), Some(g)) => assert!(g.contains(w), "{mode} {out:?}: {g:?} lacks {w:?}"),
            _ => panic!("{mode} {code:?} {out:?}: got {got:?}, want {want:?}"),
        }
    }
    // With the network granted, a network failure is not the sandbox's doing.
    let mut granted = eff(WorkspaceWrite);
    granted.network_blocked = false;
    assert_eq!(
        denial_hint(
            &granted,
            Some(6),
            "curl: (6) Could not resolve host: example.com"
        ),
        None
    );
    // With the network granted, a refused socket can only be a UNIX one, and with UNIX
    // sockets granted only a network one.
    let py = "  File \"/usr/lib/python3.11/socket.py\", line 232, in __init__\n    \
              _socket.socket.__init__(self, family, type, proto, fileno)\n\
              PermissionError: [Errno 1] Operation not permitted";
    let hint = denial_hint(&granted, Some(1), py).unwrap();
    assert!(hint.contains("needs --allow-unix-sockets"), "{hint}");
    let mut unix_granted = eff(WorkspaceWrite);
    unix_granted.unix_sockets_blocked = false;
    let hint = denial_hint(&unix_granted, Some(1), py).unwrap();
    assert!(
        hint.contains("(sockets other than AF_UNIX are refused); needs --allow-network"),
        "{hint}"
    );
}

// ---------------------------------------------------------------- kernel and report

#[test]
fn kernel_probe_and_effective_report() {
    let k = probe_kernel();
    eprintln!("kernel support: {k:?}");
    let fx = Fx::new();
    let conf = fx.prepare(&ww());
    let e = conf.effective();
    eprintln!("effective: {e}  {e:?}");
    assert_eq!(e.mode, SandboxMode::WorkspaceWrite);
    assert_eq!(e.landlock_abi.is_some(), k.landlock_abi.is_some());
    assert_eq!(e.network_blocked, k.seccomp);
    assert_eq!(e.git_read_only, k.mount_namespace);
    assert!(e.writable.contains(&fx.ws) && e.writable.contains(&fx.tmp));
    assert_eq!(
        e.protected,
        vec![fx.state_outside.clone(), fx.state_inside.clone()]
    );
    if k.landlock_abi >= Some(7) && k.seccomp && k.mount_namespace {
        assert_eq!(
            e.to_string(),
            "workspace-write (landlock abi 7, network blocked, .git read-only, unix sockets blocked)"
        );
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    } else {
        assert!(
            !e.warnings.is_empty(),
            "a missing feature must be warned about"
        );
    }
    let json = serde_json::to_value(e).unwrap();
    assert_eq!(json["mode"], "workspace-write");

    let full = fx.prepare(&policy(SandboxMode::FullAccess));
    assert_eq!(full.effective().to_string(), "full-access (no confinement)");
    assert!(!full.effective().network_blocked);
    assert_eq!(full.effective().landlock_abi, None);

    let granted = SandboxPolicy {
        network: true,
        git_writable: true,
        ..ww()
    };
    let g = fx.prepare(&granted);
    assert!(!g.effective().network_blocked);
    assert!(!g.effective().git_read_only);
    assert!(
        g.effective()
            .to_string()
            .contains("network allowed, .git writable")
    );
}

#[test]
fn missing_workspace_is_an_error() {
    let fx = Fx::new();
    let mut paths = fx.paths();
    paths.workspace = fx.root.join("nope");
    assert!(matches!(
        ww().prepare(&paths),
        Err(SandboxError::Workspace { .. })
    ));
}

// ---------------------------------------------------------------- workspace-write

#[test]
fn touch_outside_workspace_fails_under_workspace_write_and_succeeds_under_full_access() {
    let fx = Fx::new();
    let target = fx.outside.join("new");
    let o = fx.sh(&ww(), &format!("touch {}", q(&target)));
    assert_refused(&o, outside_refusal());
    assert!(!target.exists());
    let hint = denial_hint(
        &fx.prepare(&ww()).effective().clone(),
        o.status.code(),
        &String::from_utf8_lossy(&o.stderr),
    )
    .expect("hint");
    assert!(hint.contains("--sandbox full-access"), "{hint}");
    assert!(hint.contains(&fx.ws.display().to_string()), "{hint}");

    let o = fx.sh(
        &policy(SandboxMode::FullAccess),
        &format!("touch {}", q(&target)),
    );
    assert_ok(&o);
    assert!(target.exists());
}

#[test]
fn cd_root_then_touch_is_refused_by_the_kernel() {
    let fx = Fx::new();
    let name = format!("toolhost-sandbox-test-{}", std::process::id());
    let target = Path::new("/").join(&name);
    assert!(!target.exists());
    let o = fx.sh(&ww(), &format!("cd / && touch {name}"));
    assert_refused(&o, outside_refusal());
    assert!(!target.exists());
    // Same through an interpreter, which no command-line parser would see through.
    let o = fx.sh(
        &ww(),
        &format!("python3 -c 'import os; os.chdir(\"/\"); open(\"{name}\", \"w\")'"),
    );
    assert_refused(&o, outside_refusal());
    assert!(!target.exists());
}

#[test]
fn workspace_and_private_tmp_are_writable() {
    let fx = Fx::new();
    let o = fx.sh(
        &ww(),
        &format!(
            "touch new.txt && mkdir -p sub/dir && echo data > sub/dir/f && rm file.txt \
             && echo t > {}/t && echo x > /dev/null",
            q(&fx.tmp)
        ),
    );
    assert_ok(&o);
    assert!(fx.ws.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("sub/dir/f")).unwrap(),
        "data\n"
    );
    assert!(!fx.ws.join("file.txt").exists());
    assert_eq!(std::fs::read_to_string(fx.tmp.join("t")).unwrap(), "t\n");
}

#[test]
fn git_dir_is_read_only_unless_granted() {
    if !probe_kernel().mount_namespace {
        eprintln!("SKIP: no mount namespace on this kernel");
        return;
    }
    let fx = Fx::new();
    for script in [
        "touch .git/x",
        "echo evil > .git/HEAD",
        "rm .git/HEAD",
        "mkdir .git/hooks",
        "mv .git .git-moved",
        "rm -rf .git",
    ] {
        let o = fx.sh(&ww(), script);
        assert!(!o.status.success(), "{script}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("Read-only file system") || err.contains("Device or resource busy"),
            "{script}: {}",
            text(&o)
        );
    }
    assert_eq!(
        std::fs::read_to_string(fx.ws.join(".git/HEAD")).unwrap(),
        "ref: refs/heads/main\n"
    );
    assert!(!fx.ws.join(".git/x").exists() && !fx.ws.join(".git/hooks").exists());
    assert!(!fx.ws.join(".git-moved").exists());

    let o = fx.sh(&ww(), "touch .git/x");
    let e = fx.prepare(&ww()).effective().clone();
    let hint = denial_hint(&e, o.status.code(), &String::from_utf8_lossy(&o.stderr)).unwrap();
    assert!(hint.contains(".git is read-only"), "{hint}");

    // The rest of the workspace stays writable under the same sandbox.
    assert_ok(&fx.sh(&ww(), "touch not-git"));

    let granted = SandboxPolicy {
        git_writable: true,
        ..ww()
    };
    assert_ok(&fx.sh(&granted, "touch .git/x && echo new > .git/HEAD"));
    assert!(fx.ws.join(".git/x").exists());
}

#[test]
fn read_only_binds_cannot_be_unmounted_from_inside() {
    if !probe_kernel().mount_namespace {
        eprintln!("SKIP: no mount namespace on this kernel");
        return;
    }
    let fx = Fx::new();
    let o = fx.sh(
        &ww(),
        "umount -l .git; mount -o remount,rw,bind .git; \
         umount -l state-inside; touch .git/x state-inside/x",
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(!fx.ws.join(".git/x").exists());
    assert!(!fx.state_inside.join("x").exists());
}

#[test]
fn symlink_in_workspace_pointing_outside_does_not_open_a_write_path() {
    let fx = Fx::new();
    std::os::unix::fs::symlink(&fx.outside, fx.ws.join("escape-dir")).unwrap();
    std::os::unix::fs::symlink(fx.outside.join("target.txt"), fx.ws.join("escape-file")).unwrap();
    for script in [
        "touch escape-dir/new",
        "echo evil > escape-file",
        "echo evil >> escape-file",
        "truncate -s 0 escape-file",
        "rm escape-dir/target.txt",
        "cd escape-dir && touch new",
    ] {
        let o = fx.sh(&ww(), script);
        assert_refused(&o, outside_refusal());
    }
    assert!(!fx.outside.join("new").exists());
    assert_eq!(
        std::fs::read_to_string(fx.outside.join("target.txt")).unwrap(),
        "original\n"
    );
    // Reading through the symlink is fine, and so is replacing the link itself.
    let o = fx.sh(
        &ww(),
        "cat escape-file && rm escape-file && echo own > escape-file",
    );
    assert_ok(&o);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "original\n");
    assert_eq!(
        std::fs::read_to_string(fx.outside.join("target.txt")).unwrap(),
        "original\n"
    );
    // A symlink the command creates itself is no better.
    let o = fx.sh(
        &ww(),
        &format!("ln -s {} mine && touch mine/new", q(&fx.outside)),
    );
    assert_refused(&o, outside_refusal());
    assert!(!fx.outside.join("new").exists());
}

#[test]
fn host_state_is_not_writable() {
    let fx = Fx::new();
    for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
        let p = policy(mode);
        let o = fx.sh(
            &p,
            &format!(
                "echo evil >> {}",
                q(&fx.state_outside.join("session-1.log"))
            ),
        );
        assert_refused(&o, outside_refusal());
        let o = fx.sh(&p, &format!("touch {}", q(&fx.state_outside.join("new"))));
        assert_refused(&o, outside_refusal());
        let inside = fx.state_inside.join("session-2.log");
        let o = fx.sh(&p, "echo evil >> state-inside/session-2.log");
        assert!(!o.status.success(), "{mode}: {}", text(&o));
        let o = fx.sh(&p, "rm -r state-inside");
        assert!(!o.status.success(), "{mode}: {}", text(&o));
        assert_eq!(std::fs::read_to_string(&inside).unwrap(), "log\n");
        assert_eq!(
            std::fs::read_to_string(fx.state_outside.join("session-1.log")).unwrap(),
            "log\n"
        );
        assert!(!fx.state_outside.join("new").exists());
    }
    // The hint names the protected path.
    let o = fx.sh(&ww(), "touch state-inside/x");
    let stderr = String::from_utf8_lossy(&o.stderr)
        .replace("'state-inside/x'", &q(&fx.state_inside.join("x")));
    let hint = denial_hint(fx.prepare(&ww()).effective(), o.status.code(), &stderr).unwrap();
    assert!(hint.contains("host state"), "{hint}");
}

#[test]
fn private_tmp_inside_protected_dir_inside_workspace_stays_writable() {
    if !probe_kernel().mount_namespace {
        eprintln!("SKIP: no mount namespace on this kernel");
        return;
    }
    let fx = Fx::new();
    let tmp = fx.state_inside.join("tmp-session-3");
    let paths = SandboxPaths {
        private_tmp: tmp.clone(),
        ..fx.paths()
    };
    let conf = ww().prepare(&paths).unwrap();
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("touch state-inside/tmp-session-3/ok && ! touch state-inside/nope")
        .current_dir(&fx.ws);
    conf.install(&mut cmd);
    let o = cmd.output().unwrap();
    assert_ok(&o);
    assert!(tmp.join("ok").exists());
    assert!(!fx.state_inside.join("nope").exists());
}

// ---------------------------------------------------------------- read-only

#[test]
fn read_only_mode_refuses_workspace_writes_but_reads_dev_null_and_tmp_work() {
    let fx = Fx::new();
    let ro = policy(SandboxMode::ReadOnly);
    let o = fx.sh(&ro, "touch new.txt");
    assert_refused(&o, outside_refusal());
    assert!(!fx.ws.join("new.txt").exists());
    let o = fx.sh(&ro, "echo x >> file.txt");
    assert_refused(&o, outside_refusal());
    // The private temp dir is writable in every mode, read-only included.
    let o = fx.sh(&ro, &format!("touch {}", q(&fx.tmp.join("t"))));
    assert_ok(&o);
    assert!(fx.tmp.join("t").exists());

    let o = fx.sh(
        &ro,
        "cat file.txt && echo discarded > /dev/null && ls / > /dev/null",
    );
    assert_ok(&o);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "hello from the workspace\n"
    );

    let e = fx.prepare(&ro).effective().clone();
    assert!(
        e.writable.contains(&PathBuf::from("/dev/null")),
        "{:?}",
        e.writable
    );
    assert!(e.writable.contains(&fx.tmp), "{:?}", e.writable);
    assert!(!e.writable.contains(&fx.ws), "{:?}", e.writable);
    assert!(!e.git_read_only);
    let hint = denial_hint(
        &e,
        Some(1),
        "touch: cannot touch 'new.txt': Permission denied",
    );
    assert!(hint.unwrap().contains("--sandbox workspace-write"));
}

// ---------------------------------------------------------------- network

/// Connects from a sandboxed python3 to a loopback listener owned by the test.
fn python_connect(fx: &Fx, p: &SandboxPolicy) -> (Output, bool) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let o = fx.sh(
        p,
        &format!(
            "python3 -c 'import socket; s = socket.create_connection((\"127.0.0.1\", {port}), timeout=5); s.sendall(b\"hi\")'"
        ),
    );
    listener.set_nonblocking(true).unwrap();
    let accepted = match listener.accept() {
        Ok((mut s, _)) => {
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 2];
            s.read_exact(&mut buf).is_ok() && &buf == b"hi"
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept: {e}"),
    };
    (o, accepted)
}

#[test]
fn python_loopback_connect_needs_the_network_grant() {
    let fx = Fx::new();
    for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
        let (o, accepted) = python_connect(&fx, &policy(mode));
        assert_refused(&o, "Operation not permitted");
        assert!(!accepted, "{mode}: listener saw a connection");
        let e = fx.prepare(&policy(mode)).effective().clone();
        let hint = denial_hint(&e, o.status.code(), &String::from_utf8_lossy(&o.stderr));
        assert!(hint.unwrap().contains("needs --allow-network"));

        let granted = SandboxPolicy {
            mode,
            network: true,
            unix_sockets: false,
            git_writable: false,
        };
        let (o, accepted) = python_connect(&fx, &granted);
        assert_ok(&o);
        assert!(accepted, "{mode}: no connection with the grant");
    }
    let (o, accepted) = python_connect(&fx, &policy(SandboxMode::FullAccess));
    assert_ok(&o);
    assert!(accepted);
}

#[test]
fn curl_loopback_needs_the_network_grant() {
    if Command::new("curl").arg("--version").output().is_err() {
        eprintln!("SKIP: curl not installed");
        return;
    }
    let fx = Fx::new();
    let run = |p: &SandboxPolicy| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            listener.set_nonblocking(true).unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while std::time::Instant::now() < deadline {
                match listener.accept() {
                    Ok((mut s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        let mut buf = [0u8; 1024];
                        let _ = s.read(&mut buf);
                        let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
                        return true;
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
            false
        });
        let o = fx.sh(
            p,
            &format!("curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:{port}/"),
        );
        // Unblock the server thread if curl never connected.
        let _ = std::net::TcpStream::connect(("127.0.0.1", port));
        let _ = server.join();
        o
    };
    let o = run(&ww());
    assert!(!o.status.success(), "{}", text(&o));
    let e = fx.prepare(&ww()).effective().clone();
    let hint = denial_hint(&e, o.status.code(), &String::from_utf8_lossy(&o.stderr));
    assert!(
        hint.is_some_and(|h| h.contains("--allow-network")),
        "{}",
        text(&o)
    );

    let o = run(&SandboxPolicy {
        network: true,
        ..ww()
    });
    assert_ok(&o);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok");
}

#[test]
fn unix_sockets_work_with_their_grant_without_the_network_grant() {
    let fx = Fx::new();
    let sock = fx.tmp.join("s.sock");
    let script = format!(
        "python3 -c 'import socket; a, b = socket.socketpair(); a.sendall(b\"x\"); assert b.recv(1) == b\"x\"; \
         s = socket.socket(socket.AF_UNIX); s.bind(\"{}\"); s.listen(1)'",
        sock.display()
    );
    // Without the grant a connected socketpair still works, a socket of its own does not
    // (the unix_sockets module has the rest).
    assert_refused(&fx.sh(&ww(), &script), "Operation not permitted");
    let granted = SandboxPolicy {
        unix_sockets: true,
        ..ww()
    };
    let o = fx.sh(&granted, &script);
    assert_ok(&o);
    let o = fx.sh(
        &ww(),
        "python3 -c 'import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)'",
    );
    assert_refused(&o, "Operation not permitted");
}

// ---------------------------------------------------------------- process-level

#[test]
fn cannot_signal_the_host() {
    let k = probe_kernel();
    if k.landlock_abi < Some(6) {
        eprintln!("SKIP: Landlock scoping needs ABI 6");
        return;
    }
    let fx = Fx::new();
    let host = std::process::id();
    let o = fx.sh(&ww(), &format!("kill -0 {host}"));
    assert!(!o.status.success(), "{}", text(&o));
    assert_ok(&fx.sh(&policy(SandboxMode::FullAccess), &format!("kill -0 {host}")));
}

#[test]
fn independent_of_other_pre_exec_closures_and_reusable() {
    let fx = Fx::new();
    let conf = fx.prepare(&ww());
    for _ in 0..2 {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(format!("touch ok && ! touch {}", q(&fx.outside.join("x"))))
            .current_dir(&fx.ws);
        // The engine's own closures, one before and one after ours.
        // SAFETY: setsid/prctl are async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        conf.install_ref(&mut cmd);
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        assert_ok(&cmd.output().unwrap());
    }
    assert!(!fx.outside.join("x").exists());
}

#[test]
fn no_new_privs_is_set() {
    let fx = Fx::new();
    let o = fx.sh(
        &policy(SandboxMode::ReadOnly),
        "grep NoNewPrivs /proc/self/status",
    );
    assert_ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("1"),
        "{}",
        text(&o)
    );
    let o = fx.sh(
        &policy(SandboxMode::FullAccess),
        "grep NoNewPrivs /proc/self/status",
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("0"),
        "{}",
        text(&o)
    );
}

/// As root, exercise the unprivileged path too: `Command::uid` drops to nobody before our
/// closure runs, so the mount step must go through a user namespace.
#[test]
fn unprivileged_child_uses_a_user_namespace() {
    if !is_root() || !probe_kernel().user_namespaces {
        eprintln!("SKIP: needs root (to drop to nobody) and user namespaces");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let fx = Fx::new();
    for d in [
        &fx.root,
        &fx.ws,
        &fx.ws.join(".git"),
        &fx.outside,
        &fx.state_inside,
    ] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let conf = fx.prepare(&ww());
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(format!(
            "id -u && touch ok && ! touch .git/x 2>/dev/null && ! touch state-inside/x \
             && ! touch {} && ! python3 -c 'import socket; socket.socket()'",
            q(&fx.outside.join("x"))
        ))
        .current_dir(&fx.ws)
        .uid(65534)
        .gid(65534);
    conf.install(&mut cmd);
    let o = cmd.output().unwrap();
    assert_ok(&o);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "65534");
    assert!(fx.ws.join("ok").exists());
    assert!(!fx.ws.join(".git/x").exists());
    assert!(!fx.state_inside.join("x").exists());
    assert!(!fx.outside.join("x").exists());
}

#[test]
fn confined_commands_keep_no_capabilities() {
    let fx = Fx::new();
    let o = fx.sh(
        &ww(),
        "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status",
    );
    assert_ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    for line in out.lines() {
        assert!(line.ends_with("0000000000000000"), "{out}");
    }
    if is_root() {
        let o = fx.sh(
            &policy(SandboxMode::FullAccess),
            "grep CapEff /proc/self/status",
        );
        assert!(!String::from_utf8_lossy(&o.stdout).contains("0000000000000000"));
    }
}

#[test]
fn device_nodes_cannot_be_created_in_the_workspace() {
    let fx = Fx::new();
    // c 1 1 is /dev/mem: as root with CAP_MKNOD and a write rule on the workspace, this would
    // be a way around the whole filesystem confinement.
    let o = fx.sh(&ww(), "mknod mem c 1 1");
    assert!(!o.status.success(), "{}", text(&o));
    assert!(!fx.ws.join("mem").exists());
    let o = fx.sh(&ww(), &format!("mknod {}/blk b 8 0", q(&fx.tmp)));
    assert!(!o.status.success(), "{}", text(&o));
    // Ordinary special files are fine.
    assert_ok(&fx.sh(&ww(), "mkfifo fifo && test -p fifo"));
}
