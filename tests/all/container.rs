//! The image of `deploy/Containerfile` built and run with podman
//! (docs/operations.md#container): the sandbox checked inside it under the
//! documented flags, and the same image refused by `--require-sandbox` (exit
//! 69) under a seccomp profile that, like Docker's and containerd's default
//! ones for a container without `CAP_SYS_ADMIN`, refuses `unshare` and
//! `mount`.
//!
//! The base image is Debian from `mmdebstrap` (no registry is needed),
//! imported once and cached as a tarball under `target/container-base/`; the
//! binary is the debug one this test run built. Skipped, with the reason
//! printed, only where `podman` is not installed (`.ci/run` installs podman,
//! runc and mmdebstrap). Every podman command is bounded by `timeout`.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// The base image's name in podman's store.
const BASE: &str = "localhost/toolhost-test-base:bookworm";
/// The port `serve` listens on in the image (`deploy/Containerfile`).
const PORT: u16 = 8765;
/// The runtime flags this machine needs whatever the sandbox: podman's default
/// runtime (crun) refuses hybrid cgroups, and runc needs explicit ulimits.
const RUNTIME: &[&str] = &[
    "--runtime",
    "/usr/sbin/runc",
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=1024:1024",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

/// `timeout SECS podman ARGS...`, its output.
fn podman(secs: u32, args: &[&str]) -> Output {
    Command::new("timeout")
        .arg(secs.to_string())
        .arg("podman")
        .args(args)
        .output()
        .expect("running podman")
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(out: Output, what: &str) -> Output {
    assert!(out.status.success(), "{what}: {}", text(&out));
    out
}

/// The Debian base image: imported from the cached tarball, made first with
/// mmdebstrap when there is none.
fn base_image() {
    if podman(30, &["image", "exists", BASE]).status.success() {
        return;
    }
    let dir = target_dir().join("container-base");
    std::fs::create_dir_all(&dir).unwrap();
    let tar = dir.join("bookworm.tar");
    if !tar.exists() {
        // mmdebstrap picks the format from the extension.
        let partial = dir.join(format!("bookworm-{}.tar", std::process::id()));
        let out = Command::new("timeout")
            .args([
                "300",
                "mmdebstrap",
                "--variant=apt",
                "--include=bash,coreutils",
            ])
            .args(["--quiet", "bookworm"])
            .arg(&partial)
            .output()
            .expect("running mmdebstrap (apt-get install mmdebstrap)");
        assert!(out.status.success(), "mmdebstrap: {}", text(&out));
        std::fs::rename(&partial, &tar).unwrap();
    }
    ok(
        podman(120, &["import", tar.to_str().unwrap(), BASE]),
        "podman import",
    );
}

/// A container of `image` removed (with its anonymous volumes) on drop.
struct Running(String);

impl Drop for Running {
    fn drop(&mut self) {
        podman(60, &["rm", "-f", "-v", &self.0]);
    }
}

/// An image removed on drop.
struct Image(String);

impl Drop for Image {
    fn drop(&mut self) {
        podman(60, &["rmi", "-f", &self.0]);
    }
}

/// `podman exec NAME bash -c SCRIPT`.
fn exec(name: &str, script: &str) -> Output {
    podman(120, &["exec", name, "bash", "-c", script])
}

/// `toolhost call bash` inside the container `name`, allowed by the policy
/// file the test mounted, in the state dir `serve` uses: the JSON result.
fn call(name: &str, command: &str) -> (Value, String) {
    let args = serde_json::json!({ "command": command }).to_string();
    let out = podman(
        120,
        &[
            "exec",
            name,
            "toolhost",
            "call",
            "--json",
            "--policy",
            "/etc/toolhost-test/allow.toml",
            "--state-dir",
            "/var/lib/toolhost/state",
            "bash",
            &args,
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    (value, stderr)
}

#[test]
fn the_image_runs_the_full_sandbox_with_the_documented_flags_and_refuses_without() {
    if Command::new("podman").arg("--version").output().is_err() {
        println!("SKIPPED: podman is not installed (apt-get install podman runc mmdebstrap)");
        return;
    }
    let started = std::time::Instant::now();
    base_image();
    let id = std::process::id();

    // The build context: the debug binary, hard-linked when it can be.
    let ctx = target_dir().join(format!("container-ctx-{id}"));
    let _ = std::fs::remove_dir_all(&ctx);
    std::fs::create_dir_all(&ctx).unwrap();
    let binary = ctx.join("toolhost");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_toolhost"), &binary).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_toolhost"), &binary).unwrap();
    }
    std::fs::write(ctx.join("allow.toml"), "default = \"allow\"\n").unwrap();
    // The token as docs/operations.md mounts it (`--secret ...,uid=10001,mode=0400`):
    // owned by the image's user and private to it, or serve refuses it.
    let token = ctx.join("token");
    std::fs::write(&token, "c0ntainer-t0ken-0123456789abcdef\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o400)).unwrap();
    std::os::unix::fs::chown(&token, Some(10001), Some(10001)).unwrap();
    let image = Image(format!("localhost/toolhost-test:{id}"));
    let containerfile = root().join("deploy/Containerfile");
    let build = podman(
        300,
        &[
            "build",
            "--format",
            "docker",
            "--runtime",
            "/usr/sbin/runc",
            "--ulimit",
            "nofile=1024:1024",
            "-f",
            containerfile.to_str().unwrap(),
            "--build-arg",
            &format!("BASE={BASE}"),
            "--build-arg",
            "TOOLHOST=toolhost",
            "-t",
            &image.0,
            ctx.to_str().unwrap(),
        ],
    );
    let _ = std::fs::remove_file(&binary);
    ok(build, "podman build");
    let built = started.elapsed();

    // With the documented flags (podman's defaults give every layer but
    // cgroup v2, which this machine's hybrid cgroups do not have), no network
    // namespace shared with the machine: probes run inside.
    let name = format!("toolhost-test-{id}");
    let mounts = [
        format!(
            "{}:/run/secrets/toolhost/token:ro",
            ctx.join("token").display()
        ),
        format!(
            "{}:/etc/toolhost-test/allow.toml:ro",
            ctx.join("allow.toml").display()
        ),
    ];
    let mut args = vec!["run", "-d", "--name", &name, "--network", "none"];
    args.extend_from_slice(RUNTIME);
    args.extend(["-v", &mounts[0], "-v", &mounts[1], &image.0]);
    ok(podman(60, &args), "podman run");
    let running = Running(name.clone());

    // Wait for the listener: serve's stderr, followed, up to the line saying
    // it serves (or to its end, if it exited).
    let mut follow = Command::new("timeout")
        .args(["120", "podman", "logs", "-f", &name])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut logs = String::new();
    for line in BufReader::new(follow.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        logs.push_str(&line);
        logs.push('\n');
        if line.contains("serving MCP over HTTP at") {
            break;
        }
    }
    let _ = follow.kill();
    let _ = follow.wait();
    assert!(
        logs.contains("serving MCP over HTTP at http://0.0.0.0:8765/mcp"),
        "{logs}"
    );
    assert!(!logs.contains("sandbox weaker than requested"), "{logs}");

    // The image's HEALTHCHECK (GET /health) passes, and /ready is 200.
    ok(
        podman(60, &["healthcheck", "run", &name]),
        "podman healthcheck run",
    );
    let ready = ok(
        exec(
            &name,
            &format!(
                "exec 3<>/dev/tcp/127.0.0.1/{PORT}; printf 'GET /ready HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n' >&3; cat <&3"
            ),
        ),
        "GET /ready",
    );
    let ready = String::from_utf8_lossy(&ready.stdout).into_owned();
    assert!(ready.starts_with("HTTP/1.0 200 OK\r\n"), "{ready}");
    assert!(ready.contains("\"status\":\"ready\""), "{ready}");

    // doctor inside: the layers the documented flags give.
    let out = podman(
        120,
        &[
            "exec",
            &name,
            "toolhost",
            "doctor",
            "--json",
            "--state-dir",
            "/tmp/doctor",
        ],
    );
    let report: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    for layer in report["layers"].as_array().unwrap() {
        if layer["name"] != "cgroup_v2" {
            assert_eq!(layer["available"], true, "{layer}");
        }
    }
    assert_eq!(report["state_dir"]["writable"], true);

    // A write outside the workspace: refused by the read-only root, although the
    // container's user owns the directory (the same write outside toolhost works).
    ok(
        exec(&name, "touch /home/toolhost/unconfined"),
        "touch outside toolhost",
    );
    let (result, stderr) = call(&name, "touch /home/toolhost/confined; echo rc=$?");
    let out = result["text"].as_str().unwrap();
    assert!(
        out.contains("touch: cannot touch '/home/toolhost/confined': Read-only file system\nrc=1"),
        "{result}"
    );
    // Denied files are masked on a second start in the same state dir too.
    assert!(!stderr.contains("cannot be masked"), "{stderr}");
    assert!(
        !exec(&name, "test -e /home/toolhost/confined")
            .status
            .success()
    );
    let (result, _) = call(&name, "touch /workspace/inside && echo wrote");
    assert_eq!(result["text"], "wrote", "{result}");

    // Network: even the server in the same container is out of reach.
    let (result, _) = call(
        &name,
        &format!("exec 3<>/dev/tcp/127.0.0.1/{PORT} && echo connected; echo rc=$?"),
    );
    let out = result["text"].as_str().unwrap();
    assert!(out.contains("socket: Operation not permitted"), "{result}");
    assert!(!out.contains("connected"), "{result}");

    // The state dir is hidden: only this command's own session shows.
    let (result, _) = call(&name, "ls /var/lib/toolhost/state");
    assert_eq!(result["text"], "sessions", "{result}");

    // A process that left the shell's group is killed with the tree.
    let (result, _) = call(&name, "setsid sleep 4242 & echo started");
    assert!(
        result["text"]
            .as_str()
            .unwrap()
            .contains("1 process was still running after the shell exited"),
        "{result}"
    );
    let left = exec(
        &name,
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 4242' || true",
    );
    assert_eq!(
        String::from_utf8_lossy(&left.stdout).trim(),
        "0",
        "{}",
        text(&left)
    );
    drop(running);

    // Without the flags: a seccomp profile refusing unshare and mount (what
    // Docker's and containerd's defaults do without CAP_SYS_ADMIN); the image's
    // own command, with its --require-sandbox, refuses to start.
    let profile = ctx.join("no-namespaces.json");
    std::fs::write(
        &profile,
        r#"{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[
            {"names":["unshare","mount","umount2","mount_setattr"],"action":"SCMP_ACT_ERRNO","errnoRet":1}]}"#,
    )
    .unwrap();
    let seccomp = format!("seccomp={}", profile.display());
    let mut args = vec![
        "run",
        "--rm",
        "--network",
        "none",
        "--security-opt",
        &seccomp,
    ];
    args.extend_from_slice(RUNTIME);
    args.extend(["-v", &mounts[0], &image.0]);
    let out = podman(120, &args);
    assert_eq!(out.status.code(), Some(69), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "refusing to start: --require-sandbox names layers this host does not have: \
             user_namespace (unshare(CLONE_NEWUSER): Operation not permitted (os error 1); \
             needs: unshare(CLONE_NEWUSER) allowed"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "; mount_namespace (unshare(CLONE_NEWNS): Operation not permitted (os error 1); needs: "
        ),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&ctx);
    println!(
        "container test: image built in {:.1?}, whole test {:.1?}",
        built,
        started.elapsed()
    );
}
