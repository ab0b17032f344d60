//! The Kubernetes manifests in `deploy/kubernetes/` (docs/operations.md#kubernetes)
//! checked by `tests/deploy/manifests.py` from `.venv`: each object against the
//! Kubernetes schemas (kubernetes-validate, strict: unknown fields refused), then
//! the probes, volumes, securityContext, image, Secret mount and serve's
//! arguments docs/operations.md promises, a termination grace of at least
//! `--drain-timeout` plus [`STOP_AFTER_DRAIN_MAX`] (the script gets it from
//! here, so the manifests follow the code), and the tokens Secret; then the
//! real binary serves with that Secret's `tokens.toml`, mounted as the
//! manifests mount it. The container itself runs in `container.rs`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use toolhost::mcp::drain::STOP_AFTER_DRAIN_MAX;

#[test]
fn kubernetes_manifests_match_the_schemas_and_the_documented_deployment() {
    let root = crate::repo::root();
    let python = crate::support::venv_python("the manifests check (kubernetes-validate)");
    let (ws, state) = crate::support::dirs();
    std::fs::create_dir_all(state.path()).unwrap();
    let tokens = state.path().join("tokens.toml");
    let out = Command::new(&python)
        .arg("tests/deploy/manifests.py")
        .env(
            "TOOLHOST_STOP_AFTER_DRAIN_MAX_SECS",
            STOP_AFTER_DRAIN_MAX.as_secs().to_string(),
        )
        .arg(&tokens)
        .current_dir(root)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tests/deploy/manifests.py failed ({:?}):\n{stdout}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    // Every object was validated and every promise checked.
    let oks: Vec<&str> = stdout.lines().filter(|l| l.starts_with("ok: ")).collect();
    assert_eq!(oks.len(), 9, "{stdout}");

    // The Secret's file, mode 0440 as the manifests mount it, is one
    // `serve --tokens-file` starts with.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o440)).unwrap();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["serve", "--http", "127.0.0.1:0", "--tokens-file"])
        .arg(&tokens)
        .arg("--workspace")
        .arg(ws.path())
        .arg("--state-dir")
        .arg(state.path())
        .env_remove("TOOLHOST_LOG")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    for line in BufReader::new(serve.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        let serving = line.starts_with("toolhost: serving MCP over HTTP at ");
        lines.push(line);
        if serving {
            break;
        }
    }
    let _ = serve.kill();
    let status = serve.wait().unwrap();
    assert!(
        lines
            .last()
            .is_some_and(|l| l.contains("serving MCP over HTTP")),
        "serve did not start with tokens-secret.yaml's tokens ({status}): {lines:?}"
    );
}
