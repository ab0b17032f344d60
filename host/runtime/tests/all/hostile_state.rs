//! What a sandboxed command and a plugin's preopens can reach of the host's own
//! files (docs/sandbox.md#host-state-is-hidden;
//! `SandboxPaths::hidden`, `HeldDir`).
//!
//! - The state dir (other sessions' `output.log`s and temp dirs, the host-session
//!   event log, the control socket, the compiled cache) is hidden from every
//!   confined command, whatever the mode, where the state dir lies (under `/tmp`,
//!   inside the workspace) and however the path is spelled; the command's own
//!   `TMPDIR` still works. Full-access commands are not confined (documented).
//! - A preopen is the directory granted at load: swapping it for a symlink refuses
//!   the next call, and nothing outside is read or written.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use toolhost_process::{
    Caller, SandboxMode, SandboxPolicy, Sessions, SessionsConfig, StartRequest, probe_kernel,
};
use toolhost_runtime::CallError;
use toolhost_runtime::HostSessionLog;
use toolhost_runtime::{Host, HostConfig, ToolCallError, ToolResult};
use toolhost_test_fixtures::HOSTILE;

const HOST: Caller = Caller::Host;

/// Runs `command` to its end under `sessions` and returns (exit code, output, id,
/// output path).
async fn run(
    sessions: &Sessions,
    command: &str,
    cwd: Option<&str>,
) -> (Option<i32>, String, String, PathBuf) {
    let mut req = StartRequest::new(command);
    req.cwd = cwd.map(str::to_owned);
    let id = sessions.start(&HOST, req).await.expect("start");
    let exit = tokio::time::timeout(Duration::from_secs(20), sessions.wait(&HOST, &id))
        .await
        .expect("the command ended in time")
        .expect("wait");
    let range = sessions
        .read_output(&HOST, &id, 0, 1 << 20)
        .await
        .expect("read_output");
    let snap = sessions.check(&HOST, &id).expect("check");
    (
        exit.code,
        String::from_utf8_lossy(&range.data).into_owned(),
        id.to_string(),
        snap.output_path,
    )
}

fn sessions_for(ws: &Path, state: &Path, mode: SandboxMode) -> Sessions {
    let mut config = SessionsConfig::new(ws, state);
    config.sandbox = SandboxPolicy {
        mode,
        ..SandboxPolicy::default()
    };
    Sessions::new(config).expect("Sessions::new")
}

fn q(p: &Path) -> String {
    format!("'{}'", p.display())
}

/// Session A leaves a secret in its output and its temp dir; session B (another
/// command, same engine) tries every way to them through the state dir, spelled
/// as `spellings`, and uses its own temp dir.
async fn assert_state_hidden(ws: &Path, state: &Path, spellings: &[PathBuf], mode: SandboxMode) {
    let label = format!("{mode}, state {}", state.display());
    let sessions = sessions_for(ws, state, mode);
    // A keeps running (a session's temp dir is removed when it ends).
    let a_id = sessions
        .start(
            &HOST,
            StartRequest::new(
                "echo SECRET-OUTPUT-A; echo SECRET-TMP-A > \"$TMPDIR/a.txt\"; sleep 60",
            ),
        )
        .await
        .expect("start A")
        .to_string();
    let a_log = sessions.check(&HOST, &a_id).unwrap().output_path;
    let a_tmp = a_log.parent().unwrap().join("tmp");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    // Both secrets on disk: the temp file (written by A) and the output line
    // (written to output.log by the host's output pump, which may lag A).
    while std::fs::read_to_string(a_tmp.join("a.txt")).ok().as_deref() != Some("SECRET-TMP-A\n")
        || !std::fs::read_to_string(&a_log)
            .unwrap_or_default()
            .contains("SECRET-OUTPUT-A")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{label}: A never wrote"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let rel_log = a_log.strip_prefix(state).unwrap();
    let rel_tmp = a_tmp.strip_prefix(state).unwrap();
    let mut script = String::new();
    for s in spellings {
        script += &format!(
            "cat {log} && echo LEAK-LOG; cat {tmp} && echo LEAK-TMP; \
             echo \"listing: $(ls -A {state} | tr '\\n' ' ')\"; \
             echo \"sessions: $(ls -A {state}/sessions | tr '\\n' ' ')\"; \
             cat {state}/hosts/*/events.jsonl && echo LEAK-EVENTS; \
             touch {state}/planted && echo LEAK-WRITE; ",
            log = q(&s.join(rel_log)),
            tmp = q(&s.join(rel_tmp).join("a.txt")),
            state = q(s),
        );
    }
    // The host's open files and cwd through /proc magic links ($PPID is the host).
    script += "readlink /proc/$PPID/fd/0 >/dev/null 2>&1 && echo LEAK-PROC-FD; \
               readlink /proc/$PPID/cwd >/dev/null 2>&1 && echo LEAK-PROC-CWD; \
               echo mine > \"$TMPDIR/b.txt\" && cat \"$TMPDIR/b.txt\"";
    let (code, out, b_id, _) = run(&sessions, &script, None).await;
    assert_eq!(code, Some(0), "{label}: the own TMPDIR works:\n{out}");
    for leak in ["SECRET", "LEAK-"] {
        assert!(!out.contains(leak), "{label}: `{leak}` leaked:\n{out}");
    }
    assert!(out.contains("No such file or directory"), "{label}: {out}");
    // What a command sees of the state dir: its own temp dir's parents, nothing else
    // (no other session, no `hosts/`, no `compiled/`).
    let listings: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("listing:") || l.starts_with("sessions:"))
        .collect();
    let want = [
        "listing: sessions ".to_string(),
        format!("sessions: {b_id} "),
    ];
    assert_eq!(listings.len(), 2 * spellings.len(), "{label}:\n{out}");
    for pair in listings.chunks(2) {
        assert_eq!(
            pair, want,
            "{label}: only its own session is visible:\n{out}"
        );
    }
    assert!(!out.contains(&format!("{a_id} ")), "{label}: {out}");
    assert!(out.ends_with("mine\n"), "{label}: {out}");
    assert!(!state.join("planted").exists());
    // A's secrets are still there on the host side: B was refused, not early.
    assert!(a_tmp.join("a.txt").exists(), "{label}");
    sessions.shutdown().await;
}

fn mount_namespace_or_skip() -> bool {
    let k = probe_kernel();
    if !k.mount_namespace || k.landlock_abi.is_none() {
        eprintln!("SKIP: no mount namespace or Landlock on this kernel: {k:?}");
        return false;
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_dir_under_tmp_is_hidden_in_every_confined_mode() {
    if !mount_namespace_or_skip() {
        return;
    }
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let (ws, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        // A second spelling of the state dir through a symlink in the workspace.
        let link = ws.path().join("state-link");
        std::os::unix::fs::symlink(state.path(), &link).unwrap();
        let real = state.path().canonicalize().unwrap();
        assert_state_hidden(ws.path(), state.path(), &[real, link], mode).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_dir_inside_the_workspace_is_hidden_and_cannot_be_moved() {
    if !mount_namespace_or_skip() {
        return;
    }
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let ws = tempfile::tempdir().unwrap();
        let state = ws.path().join("cache/toolhost");
        std::fs::create_dir_all(&state).unwrap();
        let real = state.canonicalize().unwrap();
        // The state dir given through a symlink spelling; commands use both.
        let link = ws.path().join("st");
        std::os::unix::fs::symlink("cache/toolhost", &link).unwrap();
        assert_state_hidden(ws.path(), &link, &[real.clone(), link.clone()], mode).await;

        let sessions = sessions_for(ws.path(), &state, mode);
        // Its parent cannot be renamed away (the host would then write into a
        // directory of the command's making), nor the state dir itself.
        let (code, out, ..) = run(
            &sessions,
            "mv cache moved; mv cache/toolhost cache/x; ls -A cache/toolhost",
            None,
        )
        .await;
        assert!(real.join("sessions").is_dir(), "{mode}: {out}");
        assert!(!ws.path().join("moved").exists(), "{mode}: {out}");
        assert_eq!(code, Some(0), "{mode}: {out}");
        // A cwd inside the state dir is refused: it would keep a way in beneath the cover.
        let mut req = StartRequest::new("cat ../*/output.log");
        req.cwd = Some("cache/toolhost/sessions".into());
        let err = sessions.start(&HOST, req).await.unwrap_err().to_string();
        assert!(
            err.contains(&format!(
                "is inside the host's state dir `{}`, which sandboxed commands cannot see",
                real.display()
            )),
            "{err}"
        );
        if mode == SandboxMode::WorkspaceWrite {
            // The rest of the workspace, the state dir's parent included, stays writable.
            let (code, out, ..) = run(&sessions, "touch cache/other && echo ok", None).await;
            assert_eq!((code, out.as_str()), (Some(0), "ok\n"));
        }
        sessions.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_access_is_exempt_and_says_so() {
    // Documented: `--sandbox full-access` confines nothing, the state dir included.
    let (ws, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let sessions = sessions_for(ws.path(), state.path(), SandboxMode::FullAccess);
    let (_, _, _, a_log) = run(&sessions, "echo SECRET-FULL", None).await;
    let (code, out, ..) = run(&sessions, &format!("cat {}", q(&a_log)), None).await;
    assert_eq!((code, out.as_str()), (Some(0), "SECRET-FULL\n"));
    assert_eq!(
        sessions.sandbox().to_string(),
        "full-access (no confinement)"
    );
    sessions.shutdown().await;
}

// ---------------------------------------------------------------- through plugins

/// A plugin dir with `hostile.wasm`, its manifest, `granted/inner/file.txt` and
/// `outside/secret.txt`.
fn plugin_dir(manifest: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hostile.wasm"), HOSTILE).unwrap();
    std::fs::write(dir.path().join("hostile.toml"), manifest).unwrap();
    std::fs::create_dir_all(dir.path().join("granted/inner")).unwrap();
    std::fs::write(dir.path().join("granted/inner/file.txt"), "granted").unwrap();
    std::fs::create_dir(dir.path().join("outside")).unwrap();
    std::fs::write(dir.path().join("outside/secret.txt"), "OUTSIDE-SECRET").unwrap();
    dir
}

struct Env {
    host: Host,
    dir: tempfile::TempDir,
    state: tempfile::TempDir,
    events: PathBuf,
    _ws: tempfile::TempDir,
}

/// A host with the default policy, a persisted host-session log and the hostile
/// plugin under `manifest`.
async fn env(manifest: &str) -> Env {
    let dir = plugin_dir(manifest);
    let (ws, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = HostSessionLog::open(state.path(), None).expect("host-session log");
    let events = log.path().expect("a persisted log").to_path_buf();
    let mut config = HostConfig::new(ws.path(), state.path());
    config.plugins = vec![dir.path().join("hostile.wasm")];
    config.events = Some(Arc::new(log));
    let host = Host::new(config)
        .await
        .expect("host with the hostile plugin");
    Env {
        host,
        dir,
        state,
        events,
        _ws: ws,
    }
}

async fn call(
    host: &Host,
    tool: &str,
    args: serde_json::Value,
) -> Result<ToolResult, ToolCallError> {
    host.call_tool(tool, args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_granted_cat_cannot_read_another_plugins_output_or_host_state() {
    if !mount_namespace_or_skip() {
        return;
    }
    let env = env("id = \"hostile\"\ncontract = \"0.1.0\"\nexec = [\"cat *\", \"ls *\"]\n").await;
    // The bash plugin prints a secret; it lands in its output.log and the event log.
    let out = call(
        &env.host,
        "bash",
        serde_json::json!({"command": "echo TOPSECRET-7f3a"}),
    )
    .await
    .expect("bash");
    assert_eq!(out.text().trim_end(), "TOPSECRET-7f3a", "{out:?}");
    let sessions_dir = env.state.path().canonicalize().unwrap().join("sessions");
    let logs: Vec<PathBuf> = std::fs::read_dir(&sessions_dir)
        .unwrap()
        .map(|e| e.unwrap().path().join("output.log"))
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("TOPSECRET-7f3a")))
        .collect();
    assert_eq!(logs.len(), 1, "the secret is in one output.log on disk");
    let victim = &logs[0];
    assert!(
        std::fs::read_to_string(&env.events)
            .unwrap()
            .contains("TOPSECRET-7f3a"),
        "the secret is in the host-session event log on disk"
    );

    // `cat *` and `ls *` are granted, and the default policy allows them.
    let state = env.state.path().canonicalize().unwrap();
    for (command, expect) in [
        (
            format!("cat {}", victim.display()),
            "No such file or directory",
        ),
        (
            format!("cat {}", env.events.display()),
            "No such file or directory",
        ),
        (
            format!("ls -A {}", state.display()),
            "exit: Some(0)\nsessions\n",
        ),
        (
            format!("ls -A {}", state.join("hosts").display()),
            "No such file or directory",
        ),
    ] {
        let out = call(&env.host, "run", serde_json::json!({"command": command}))
            .await
            .expect("run");
        assert!(out.text().contains(expect), "{command}: {out:?}");
        assert!(!out.text().contains("TOPSECRET"), "{command}: {out:?}");
        assert!(!out.text().contains("compiled"), "{command}: {out:?}");
        if expect.contains("No such file") {
            assert!(out.is_error, "{command} must fail: {out:?}");
        }
    }
    // Its own session is all it sees under sessions/.
    let out = call(
        &env.host,
        "run",
        serde_json::json!({"command": format!("ls -A {}", sessions_dir.display())}),
    )
    .await
    .expect("run");
    let victim_id = victim
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();
    assert!(!out.text().contains(victim_id), "{out:?}");
    assert_eq!(
        out.text().lines().count(),
        2,
        "exit line + its own id: {out:?}"
    );
}

const PREOPEN: &str = "id = \"hostile\"\ncontract = \"0.1.0\"\n\
    [[preopen]]\nhost = \"granted/inner\"\nguest = \"/inner\"\nmode = \"read-write\"\n";

fn refused(result: Result<ToolResult, ToolCallError>, host_dir: &Path, why: &str) {
    match result {
        Err(ToolCallError::Plugin(e @ CallError::Host { .. })) => assert_eq!(
            e.to_string(),
            format!(
                "plugin `hostile` could not run: preopen /inner ({}) is no longer the \
                 directory granted at load: {why}; the call is refused",
                host_dir.display()
            )
        ),
        other => panic!("expected the preopen refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preopen_swapped_for_a_symlink_is_refused_and_nothing_outside_is_touched() {
    let env = env(PREOPEN).await;
    let granted = env.dir.path().canonicalize().unwrap().join("granted");
    let inner = granted.join("inner");
    let outside = env.dir.path().canonicalize().unwrap().join("outside");
    let read = |path: &str| call(&env.host, "read", serde_json::json!({"path": path}));
    let write = |path: &str| {
        call(
            &env.host,
            "write",
            serde_json::json!({"path": path, "text": "planted"}),
        )
    };

    let out = read("/inner/file.txt").await.expect("read");
    assert_eq!(out.text(), "ok: 7", "{out:?}");

    // What a sandboxed command in the workspace (or the plugin) could do: move the
    // directory away and put a symlink to another directory in its place.
    std::fs::rename(&inner, granted.join("inner.old")).unwrap();
    std::os::unix::fs::symlink(&outside, &inner).unwrap();
    refused(
        write("/inner/marker").await,
        &inner,
        "it was replaced by a symlink",
    );
    refused(
        read("/inner/secret.txt").await,
        &inner,
        "it was replaced by a symlink",
    );
    assert!(!outside.join("marker").exists());
    assert!(!granted.join("inner.old/marker").exists());

    // A symlink to the host's root.
    std::fs::remove_file(&inner).unwrap();
    std::os::unix::fs::symlink("/", &inner).unwrap();
    refused(
        read("/inner/etc/passwd").await,
        &inner,
        "it was replaced by a symlink",
    );
    refused(
        write("/inner/tmp/marker").await,
        &inner,
        "it was replaced by a symlink",
    );

    // Another directory under the same name.
    std::fs::remove_file(&inner).unwrap();
    std::fs::create_dir(&inner).unwrap();
    refused(
        read("/inner/file.txt").await,
        &inner,
        &format!("it now leads to another directory ({})", inner.display()),
    );
    std::fs::remove_dir(&inner).unwrap();

    // The granted directory back in place: calls work again, on that directory.
    std::fs::rename(granted.join("inner.old"), &inner).unwrap();
    let out = write("/inner/marker").await.expect("write");
    assert!(!out.is_error, "{out:?}");
    assert_eq!(
        std::fs::read_to_string(inner.join("marker")).unwrap(),
        "planted"
    );
    assert!(!outside.join("marker").exists());
}

#[test]
fn hiding_works_for_an_unprivileged_command_in_a_user_namespace() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    use toolhost_process::SandboxPaths;
    let k = probe_kernel();
    if !nix::unistd::getuid().is_root() || !k.user_namespaces || k.landlock_abi.is_none() {
        eprintln!("SKIP: needs root (to drop to nobody), user namespaces and Landlock");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().canonicalize().unwrap().join("ws");
    let state = ws.join("cache/toolhost");
    let tmp = state.join("sessions/bg_1/tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(state.join("secret.log"), "SECRET").unwrap();
    for d in [
        root.path(),
        &ws,
        &ws.join("cache"),
        &state,
        &state.join("sessions"),
    ] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    for d in [&state.join("sessions/bg_1"), &tmp] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let paths = SandboxPaths {
        workspace: ws.clone(),
        private_tmp: tmp.clone(),
        protected: Vec::new(),
        hidden: vec![state.clone()],
        ..Default::default()
    };
    let conf = SandboxPolicy::default().prepare(&paths).expect("prepare");
    assert!(
        conf.effective().warnings.is_empty(),
        "{:?}",
        conf.effective()
    );
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(
            "id -u; cat cache/toolhost/secret.log; ls -A cache/toolhost; \
             mv cache moved; echo t > cache/toolhost/sessions/bg_1/tmp/f && echo tmp-ok",
        )
        .current_dir(&ws)
        .uid(65534)
        .gid(65534);
    conf.install(&mut cmd);
    let o = cmd.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(out, "65534\nsessions\ntmp-ok\n", "stderr: {err}");
    assert!(err.contains("No such file or directory"), "{err}");
    assert_eq!(std::fs::read_to_string(tmp.join("f")).unwrap(), "t\n");
    assert!(ws.join("cache").is_dir() && !ws.join("moved").exists());
}

// ------------------------------------------------- preopens over the state dir

/// `dir/<id>.wasm` (the hostile plugin) with a manifest granting `preopens`
/// (`(host, guest)` pairs, read-write). Returns the component's path.
fn plugin_with_preopens(dir: &Path, id: &str, preopens: &[(&Path, &str)]) -> PathBuf {
    let wasm = dir.join(format!("{id}.wasm"));
    std::fs::write(&wasm, HOSTILE).unwrap();
    let mut manifest = format!("id = \"{id}\"\ncontract = \"0.1.0\"\n");
    for (host, guest) in preopens {
        manifest.push_str(&format!(
            "[[preopen]]\nhost = \"{}\"\nguest = \"{guest}\"\nmode = \"read-write\"\n",
            host.display()
        ));
    }
    std::fs::write(dir.join(format!("{id}.toml")), manifest).unwrap();
    wasm
}

/// The refusal of `plugin`'s preopen `guest` (`host`) for `relation`, as an
/// explicit `--plugin` meets it: an error naming the preopen, the state dir and
/// the rule.
async fn assert_refused_at_load(
    ws: &Path,
    state: &Path,
    wasm: PathBuf,
    guest: &str,
    host: &Path,
    relation: &str,
) {
    let mut config = HostConfig::new(ws, state);
    config.plugins = vec![wasm];
    let e = match Host::new(config).await {
        Ok(_) => panic!("preopen {guest} ({}) was accepted", host.display()),
        Err(e) => e.to_string(),
    };
    let state = state.canonicalize().unwrap();
    for part in [
        format!(
            "preopen {guest} ({})",
            host.canonicalize().unwrap().display()
        ),
        format!("{relation} the host's state dir {}", state.display()),
        "a preopen may neither contain the state dir nor lie inside it".to_string(),
    ] {
        assert!(e.contains(&part), "missing {part:?} in: {e}");
    }
}

/// Review item (High): the workspace holds the state dir (`ws/a/st`), and a
/// plugin asks for the workspace as a read-write preopen. Preopens are used by
/// the host itself, in no mount namespace, so it would read other sessions'
/// `output.log`s and could rename `a` from under the host. It is refused at load:
/// an explicit `--plugin` stops the host naming the rule; from `--plugins-dir`
/// it is skipped with that reason and the others load. So is a preopen inside the
/// state dir, and a symlinked spelling of the workspace; a preopen beside the
/// state dir still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preopen_over_the_state_dir_is_refused_at_load() {
    let ws = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    let state = ws.path().join("a/st");
    let inside = state.join("sessions");
    let data = ws.path().join("data");
    for d in [&inside, &data] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(data.join("file.txt"), "beside").unwrap();
    let link = plugins.path().join("ws-link");
    std::os::unix::fs::symlink(ws.path(), &link).unwrap();

    // Explicit `--plugin`: an error, before any plugin code runs.
    let explicit = tempfile::tempdir().unwrap();
    let over = plugin_with_preopens(explicit.path(), "over", &[(ws.path(), "/ws")]);
    assert_refused_at_load(ws.path(), &state, over, "/ws", ws.path(), "contains").await;
    let under = plugin_with_preopens(explicit.path(), "under", &[(&inside, "/s")]);
    assert_refused_at_load(ws.path(), &state, under, "/s", &inside, "lies inside").await;
    let itself = plugin_with_preopens(explicit.path(), "itself", &[(&state, "/st")]);
    assert_refused_at_load(ws.path(), &state, itself, "/st", &state, "contains").await;
    let second = plugin_with_preopens(
        explicit.path(),
        "second",
        &[(&data, "/data"), (&link, "/ws")],
    );
    assert_refused_at_load(ws.path(), &state, second, "/ws", ws.path(), "contains").await;

    // `--plugins-dir`: the overlapping ones are skipped, the good one loads.
    plugin_with_preopens(plugins.path(), "over", &[(ws.path(), "/ws")]);
    plugin_with_preopens(plugins.path(), "under", &[(&inside, "/s")]);
    plugin_with_preopens(plugins.path(), "good", &[(&data, "/data")]);
    let mut config = HostConfig::new(ws.path(), &state);
    config.plugins_dir = Some(plugins.path().to_path_buf());
    let host = Host::new(config).await.expect("host");
    let skipped: Vec<(String, String)> = host
        .skipped_plugins()
        .iter()
        .map(|s| {
            let file = s.file.file_name().unwrap().to_string_lossy().into_owned();
            (file, s.error.clone())
        })
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    for (file, relation) in [("over.wasm", "contains"), ("under.wasm", "lies inside")] {
        let (_, error) = skipped
            .iter()
            .find(|(f, _)| f == file)
            .unwrap_or_else(|| panic!("{file} not skipped: {skipped:?}"));
        assert!(
            error.contains(&format!("{relation} the host's state dir"))
                && error.contains("a preopen may neither contain the state dir nor lie inside it"),
            "{file}: {error}"
        );
    }
    let ids: Vec<String> = host.plugins().iter().map(|p| p.id().to_string()).collect();
    assert_eq!(ids, ["bash", "good"]);

    // The preopen beside the state dir works, and the built-in bash still runs.
    let out = call(&host, "read", serde_json::json!({"path": "/data/file.txt"}))
        .await
        .expect("read");
    assert_eq!(out.text(), "ok: 6", "{out:?}");
    let out = call(&host, "bash", serde_json::json!({"command": "echo alive"}))
        .await
        .expect("bash");
    assert_eq!(out.text().trim_end(), "alive", "{out:?}");
}
