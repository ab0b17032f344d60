//! What the sandbox confines besides data: metadata outside the writable roots, setuid
//! and setgid files anywhere, the kernel keyrings, io_uring, and what git's config points
//! at. Real commands (python3, git when present) under a prepared [`Confinement`].

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use toolhost_process::{SandboxMode, SandboxPaths, SandboxPolicy, probe_kernel};

/// `root/{ws, tmp, outside/f}` with `outside/f` mode 0600 and mtime 2020-01-01.
struct Tree {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    tmp: PathBuf,
    outside: PathBuf,
}

const MTIME_2020: i64 = 1_577_836_800;

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (ws, tmp, outside) = (root.join("ws"), root.join("tmp"), root.join("outside"));
        for d in [&ws, &tmp, &outside] {
            std::fs::create_dir_all(d).unwrap();
        }
        let f = outside.join("f");
        std::fs::write(&f, "data\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(MTIME_2020 as u64);
        std::fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(t)
            .unwrap();
        Tree {
            _dir: dir,
            ws,
            tmp,
            outside,
        }
    }

    fn run(&self, policy: &SandboxPolicy, program: &str, args: &[&str]) -> Output {
        let conf = policy
            .prepare(&SandboxPaths {
                workspace: self.ws.clone(),
                private_tmp: self.tmp.clone(),
                ..Default::default()
            })
            .expect("prepare");
        let mut cmd = Command::new(program);
        cmd.args(args).current_dir(&self.ws);
        conf.install(&mut cmd);
        cmd.output().expect("spawn")
    }
}

fn text(o: &Output) -> String {
    format!(
        "status={:?}\nstdout={}\nstderr={}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Each operation with the errno name it got (`OK` when it succeeded), one per line.
#[cfg(target_arch = "x86_64")]
const PROBE: &str = r#"
import ctypes, errno, fcntl, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
outside = sys.argv[1]
os.chdir(sys.argv[2])
def report(name, fn):
    try:
        fn()
        print(name, "OK")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
def sys_call(nr, *args):
    libc.syscall.restype = ctypes.c_long
    r = libc.syscall(nr, *args)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
report("chmod-outside", lambda: os.chmod(outside, 0o644))
report("utime-outside", lambda: os.utime(outside, (0, 0)))
report("setxattr-outside", lambda: os.setxattr(outside, "user.pwn", b"1"))
report("chown-outside", lambda: os.chown(outside, os.getuid(), os.getgid()))
def setflags(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        # FS_IOC_SETFLAGS with no flag: chattr's call, refused before the flags count.
        fcntl.ioctl(fd, 0x40086602, struct.pack("l", 0))
    finally:
        os.close(fd)
report("setflags-outside", lambda: setflags(outside))
open("exe", "w").close()
report("chmod-suid", lambda: os.chmod("exe", 0o4755))
report("chmod-sgid", lambda: os.chmod("exe", 0o2755))
report("open-suid", lambda: os.close(os.open("mk", os.O_CREAT | os.O_WRONLY, 0o4755)))
report("mknod-suid", lambda: os.mknod("mkn", 0o104755))
# A v2 `security.capability` granting CAP_SYS_ADMIN, effective.
fcap = struct.pack("<5I", 0x02000001, 1 << 21, 0, 0, 0)
report("setxattr-fcap", lambda: os.setxattr("exe", "security.capability", fcap))
report("openat2", lambda: sys_call(437, -100, b"x", None, 0))
report("io_uring_setup", lambda: sys_call(425, 1, ctypes.create_string_buffer(120)))
report("add_key", lambda: sys_call(248, b"user", b"toolhost-test", b"s", 1, -4))
report("request_key", lambda: sys_call(249, b"user", b"toolhost-test", None, 0))
report("keyctl", lambda: sys_call(250, 0, -4, 0))
report("chmod-644-inside", lambda: os.chmod("exe", 0o644))
"#;

#[cfg(target_arch = "x86_64")]
const EXPECTED: &str = "chmod-outside EROFS\nutime-outside EROFS\nsetxattr-outside EROFS\n\
chown-outside EROFS\nsetflags-outside EROFS\n\
chmod-suid EPERM\nchmod-sgid EPERM\nopen-suid EPERM\nmknod-suid EPERM\nsetxattr-fcap EPERM\n\
openat2 ENOSYS\n\
io_uring_setup EPERM\nadd_key EPERM\nrequest_key EPERM\nkeyctl EPERM\nchmod-644-inside OK\n";

#[test]
#[cfg(target_arch = "x86_64")] // The probe's syscall numbers.
fn metadata_outside_the_roots_and_setid_files_anywhere_are_refused() {
    let support = probe_kernel();
    if !support.read_only_root || !support.seccomp || support.landlock_abi.is_none() {
        eprintln!("SKIP: needs a read-only root (mount_setattr), seccomp and Landlock");
        return;
    }
    let tree = Tree::new();
    let f = tree.outside.join("f");
    let plain = SandboxPolicy::default();
    // Both grants: no socket program at all, the confinement program still on.
    let granted = SandboxPolicy {
        network: true,
        unix_sockets: true,
        ..SandboxPolicy::default()
    };
    let read_only = SandboxPolicy {
        mode: SandboxMode::ReadOnly,
        ..SandboxPolicy::default()
    };
    // Each confined mode, the set-id probes where it may write: the workspace, or the
    // private temp dir under read-only.
    for (policy, dir) in [
        (&plain, &tree.ws),
        (&granted, &tree.ws),
        (&read_only, &tree.tmp),
    ] {
        let conf = policy
            .prepare(&SandboxPaths {
                workspace: tree.ws.clone(),
                private_tmp: tree.tmp.clone(),
                ..Default::default()
            })
            .unwrap();
        assert!(conf.effective().metadata_read_only && conf.effective().setid_refused);
        for junk in ["exe", "mk", "mkn"] {
            let _ = std::fs::remove_file(dir.join(junk));
        }
        let args = ["-c", PROBE, f.to_str().unwrap(), dir.to_str().unwrap()];
        let o = tree.run(policy, "python3", &args);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            EXPECTED,
            "{}: {}",
            policy.mode,
            text(&o)
        );
        let mode = std::fs::metadata(dir.join("exe")).unwrap().mode();
        assert_eq!(mode & 0o7777, 0o644, "exe has mode {mode:o}");
        assert!(!dir.join("mk").exists() && !dir.join("mkn").exists());
        assert!(xattr_names(&dir.join("exe")).is_empty());
    }
    let meta = std::fs::metadata(&f).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o600);
    assert_eq!(meta.mtime(), MTIME_2020);
    assert!(
        xattr_names(&f).is_empty(),
        "an xattr was set: {:?}",
        xattr_names(&f)
    );
}

fn xattr_names(p: &Path) -> Vec<u8> {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    let mut buf = [0u8; 256];
    // SAFETY: a valid path and a buffer of its stated size.
    let n = unsafe { libc::listxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    buf[..n.max(0) as usize].to_vec()
}

#[test]
fn a_refused_setuid_chmod_gets_its_hint() {
    if !probe_kernel().seccomp {
        eprintln!("SKIP: no seccomp");
        return;
    }
    let tree = Tree::new();
    let policy = SandboxPolicy::default();
    let o = tree.run(&policy, "/bin/sh", &["-c", "touch exe && chmod u+s exe"]);
    let stderr = String::from_utf8_lossy(&o.stderr)
        .replace("'exe'", &format!("'{}'", tree.ws.join("exe").display()));
    let conf = policy
        .prepare(&SandboxPaths {
            workspace: tree.ws.clone(),
            private_tmp: tree.tmp.clone(),
            ..Default::default()
        })
        .unwrap();
    let hint = toolhost_process::denial_hint(conf.effective(), o.status.code(), &stderr);
    assert_eq!(
        hint.as_deref(),
        Some(
            "sandbox denial (likely): setuid/setgid modes, io_uring and the kernel keyrings \
             are refused in every confined mode; only --sandbox full-access allows them"
        ),
        "{}",
        text(&o)
    );
}

#[test]
fn full_access_is_not_confined_by_the_seccomp_program() {
    let tree = Tree::new();
    let full = SandboxPolicy {
        mode: SandboxMode::FullAccess,
        ..SandboxPolicy::default()
    };
    let o = tree.run(
        &full,
        "python3",
        &[
            "-c",
            "import os; open('exe','w').close(); os.chmod('exe', 0o4755); print('ok')",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok\n", "{}", text(&o));
}

#[test]
fn hooks_path_from_the_git_config_is_read_only() {
    if !probe_kernel().mount_namespace {
        eprintln!("SKIP: no mount namespace on this kernel");
        return;
    }
    let tree = Tree::new();
    std::fs::create_dir_all(tree.ws.join(".git")).unwrap();
    std::fs::create_dir_all(tree.ws.join(".husky/_")).unwrap();
    std::fs::write(
        tree.ws.join(".git/config"),
        "[core]\n\tbare = false\n\thooksPath = .husky/_\n",
    )
    .unwrap();
    let o = tree.run(
        &SandboxPolicy::default(),
        "/bin/sh",
        &[
            "-c",
            "echo 'echo HOOK RAN' > .husky/_/pre-commit; echo rc=$?; \
             touch .husky/new; echo rc=$?; touch ok; echo rc=$?",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "rc=2\nrc=1\nrc=0\n",
        "{}",
        text(&o)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Read-only file system"),
        "{}",
        text(&o)
    );
    assert!(!tree.ws.join(".husky/_/pre-commit").exists());
    assert!(tree.ws.join("ok").exists());
}

#[test]
fn a_fifo_as_git_config_is_noted_and_never_blocks() {
    let tree = Tree::new();
    std::fs::create_dir_all(tree.ws.join(".git")).unwrap();
    let c = std::ffi::CString::new(tree.ws.join(".git/config").to_str().unwrap()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let ws = tree.ws.clone();
    std::thread::spawn(move || {
        let _ = done_tx.send(toolhost_process::git_targets(&ws));
    });
    let found = done_rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("git_targets blocked on a FIFO");
    assert_eq!(found.paths, vec![tree.ws.join(".git")]);
    assert_eq!(
        found.notes,
        vec![format!(
            "git config {} is not a regular file (a FIFO, socket, device or symlink): \
             ignored, so nothing it names is protected",
            tree.ws.join(".git/config").display()
        )]
    );
}

/// The engine reads the workspace's `.git` off its spawner thread, non-blocking: a FIFO
/// planted as `.git/config` neither hangs the start nor any later one, and the start's
/// sandbox says what was not read.
#[test]
fn a_fifo_git_config_never_blocks_a_start() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let env = crate::support::env();
        let ws = env.ws.path();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        let c = std::ffi::CString::new(ws.join(".git/config").to_str().unwrap()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for _ in 0..3 {
            let req = toolhost_process::StartRequest::new("echo ok");
            let resolved = env
                .sessions
                .resolve(req, &SandboxPolicy::default())
                .unwrap();
            let id = tokio::time::timeout(
                crate::support::HANG,
                env.sessions.spawn(&crate::support::HOST, resolved),
            )
            .await
            .expect("the start hung")
            .unwrap();
            let snap = crate::support::wait_end(&env.sessions, &id).await;
            assert_eq!(snap.output_tail, "ok\n");
            assert!(snap.sandbox.contains("1 warning(s)"), "{}", snap.sandbox);
        }
    });
}
