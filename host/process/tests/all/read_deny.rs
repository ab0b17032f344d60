//! `deny_read`: masks in the command's mount namespace, seen by every kind of reader,
//! and what the mechanism cannot do (a hard link made earlier), with real commands.

use std::path::PathBuf;
use std::process::{Command, Output};

use toolhost_process::{
    Caller, DeniedRead, SandboxPaths, SandboxPolicy, Sessions, SessionsConfig, StartRequest,
    default_read_denied, probe_kernel,
};

/// `root/{home/{.sshx/k, token}, ws/{hl, link}, tmp, mask}`: `ws/hl` a hard link to
/// `home/.sshx/k` made before any command runs, `ws/link -> home/.sshx/k`, `ws/tok` a
/// hard link to `home/token`, `mask` an empty mode-0000 file.
struct Home {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    ws: PathBuf,
    tmp: PathBuf,
    mask: PathBuf,
}

impl Home {
    fn new() -> Home {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (home, ws, tmp) = (root.join("home"), root.join("ws"), root.join("tmp"));
        for d in [&home.join(".sshx"), &ws, &tmp] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(home.join(".sshx/k"), "SECRET\n").unwrap();
        std::fs::write(home.join("token"), "TOKEN\n").unwrap();
        std::fs::hard_link(home.join(".sshx/k"), ws.join("hl")).unwrap();
        std::fs::hard_link(home.join("token"), ws.join("tok")).unwrap();
        std::os::unix::fs::symlink(home.join(".sshx/k"), ws.join("link")).unwrap();
        let mask = root.join("mask");
        std::fs::write(&mask, "").unwrap();
        std::fs::set_permissions(&mask, std::os::unix::fs::PermissionsExt::from_mode(0o000))
            .unwrap();
        Home {
            _dir: dir,
            root,
            home,
            ws,
            tmp,
            mask,
        }
    }

    fn deny(&self, entries: &[&str]) -> Vec<DeniedRead> {
        entries
            .iter()
            .map(|e| DeniedRead::parse(e, Some(&self.home), "policy line 1").unwrap())
            .collect()
    }

    fn paths(&self, denied: Vec<DeniedRead>) -> SandboxPaths {
        SandboxPaths {
            workspace: self.ws.clone(),
            private_tmp: self.tmp.clone(),
            read_denied: denied,
            mask_file: Some(self.mask.clone()),
            ..Default::default()
        }
    }

    fn sh(&self, denied: &[&str], script: &str) -> Output {
        let conf = SandboxPolicy::default()
            .prepare(&self.paths(self.deny(denied)))
            .unwrap();
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(script)
            .current_dir(&self.ws)
            .env("H", &self.home);
        conf.install(&mut cmd);
        cmd.output().unwrap()
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

fn skip() -> bool {
    let s = probe_kernel();
    if !s.mount_namespace || s.landlock_abi.is_none() {
        eprintln!("SKIP: needs a mount namespace and Landlock");
        return true;
    }
    false
}

/// Each reader prints `ok` or the first word of its error's reason.
const READERS: &str = r#"
r() { if out=$("$@" 2>&1); then echo "ok $out"; else echo "$out" | grep -o 'Permission denied\|Read-only file system\|Device or resource busy\|No such file' | head -1 | grep . || echo "refused"; fi; }
r cat "$H/.sshx/k"
r ls "$H/.sshx"
r find "$H/.sshx"
r python3 -c "open('$H/.sshx/k').read()"
r cat link
r cat "/proc/self/root$H/.sshx/k"
r cat "$H/token"
r chmod 777 "$H/.sshx"
r mv "$H/.sshx" "$H/moved"
r umount "$H/.sshx"
r cat hl
r cat tok
"#;

#[test]
fn a_denied_dir_and_file_are_hidden_from_every_reader_but_an_earlier_hard_link() {
    if skip() {
        return;
    }
    let h = Home::new();
    let conf = SandboxPolicy::default()
        .prepare(&h.paths(h.deny(&["~/.sshx", "~/token", "~/missing"])))
        .unwrap();
    let e = conf.effective();
    assert_eq!(
        e.read_denied,
        vec![
            DeniedRead {
                path: h.home.join(".sshx"),
                origin: "policy line 1".into()
            },
            DeniedRead {
                path: h.home.join("token"),
                origin: "policy line 1".into()
            },
        ]
    );
    assert!(e.to_string().contains(", 2 reads denied"), "{e}");
    assert!(
        e.warnings.iter().any(|w| w
            == &format!(
                "deny_read {} has 2 hard links: a link elsewhere stays readable",
                h.home.join("token").display()
            )),
        "{:?}",
        e.warnings
    );
    let o = h.sh(&["~/.sshx", "~/token"], READERS);
    // Outside the writable roots a mask can be neither chmod-ed nor renamed (`EROFS`:
    // the read-only root). `umount` as a non-root user fails before the kernel is
    // asked; as root the Landlock domain refuses it ("must be superuser" / "not
    // permitted").
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[..9],
        [
            "Permission denied",
            "Permission denied",
            "Permission denied",
            "Permission denied",
            "Permission denied",
            "Permission denied",
            "Permission denied",
            "Read-only file system",
            "Read-only file system",
        ],
        "{}",
        text(&o)
    );
    assert_eq!(lines[9], "refused", "{}", text(&o));
    // The documented limit: a hard link made before the command started reads the data.
    assert_eq!(lines[10..], ["ok SECRET", "ok TOKEN"], "{}", text(&o));
    // Nothing changed on the host.
    assert_eq!(
        std::fs::read_to_string(h.home.join(".sshx/k")).unwrap(),
        "SECRET\n"
    );
}

/// Beneath a denied directory that holds the workspace and the temp dir, only the way
/// down to them shows (mode 0111: walked, never listed); the rest is gone.
#[test]
fn a_denied_dir_holding_the_workspace_keeps_the_workspace_and_temp_dir() {
    if skip() {
        return;
    }
    let h = Home::new();
    let root = h.root.to_str().unwrap().to_owned();
    let script = format!(
        "echo ws > f && cat f; echo t > {tmp}/t && cat {tmp}/t; ls {root} 2>&1 | grep -o 'Permission denied'; \
         cat {home}/token 2>&1 | grep -o 'No such file'; cd {root} && echo walked",
        tmp = h.tmp.display(),
        root = root,
        home = h.home.display()
    );
    let o = h.sh(&[&root], &script);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "ws\nt\nPermission denied\nNo such file\nwalked\n",
        "{}",
        text(&o)
    );
}

#[test]
fn the_engine_masks_its_configured_denials_with_its_own_mask_file() {
    if skip() {
        return;
    }
    let h = Home::new();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let state = tempfile::tempdir().unwrap();
        let mut config = SessionsConfig::new(&h.ws, state.path());
        config.read_denied = h.deny(&["~/token", "~/.sshx"]);
        let sessions = Sessions::new(config).unwrap();
        let mask = state.path().join("sandbox/mask");
        let meta = std::fs::symlink_metadata(&mask).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777,
            0
        );
        assert_eq!(sessions.sandbox().read_denied.len(), 2);
        let req = StartRequest::new(format!(
            "cat {}/token; cat {}/.sshx/k",
            h.home.display(),
            h.home.display()
        ));
        let resolved = sessions.resolve(req, &SandboxPolicy::default()).unwrap();
        let id = sessions.spawn(&Caller::Host, resolved).await.unwrap();
        let snap = crate::support::wait_end(&sessions, &id).await;
        let out = snap.output_tail.clone();
        assert_eq!(snap.exit.as_ref().and_then(|e| e.code), Some(1), "{out}");
        assert_eq!(
            out,
            format!(
                "cat: {0}/token: Permission denied\ncat: {0}/.sshx/k: Permission denied\n",
                h.home.display()
            )
        );
        assert!(
            snap.sandbox.contains(", 2 reads denied"),
            "{}",
            snap.sandbox
        );
    });
}

#[test]
fn the_default_list_is_absolute_and_masks_only_what_exists() {
    let h = Home::new();
    std::fs::create_dir_all(h.home.join(".aws")).unwrap();
    let defaults = default_read_denied(Some(&h.home));
    assert!(defaults.iter().all(|d| d.path.is_absolute()));
    let conf = SandboxPolicy::default()
        .prepare(&h.paths(defaults))
        .unwrap();
    let home_masked: Vec<_> = conf
        .effective()
        .read_denied
        .iter()
        .filter(|d| d.path.starts_with(&h.home))
        .map(|d| d.path.clone())
        .collect();
    if probe_kernel().mount_namespace {
        assert_eq!(home_masked, vec![h.home.join(".aws")]);
    }
}
