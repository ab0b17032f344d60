//! The Kubernetes manifests in `deploy/kubernetes/` (docs/operations.md#kubernetes)
//! checked by `tests/deploy/manifests.py` from `.venv`: each object against the
//! Kubernetes schemas (kubernetes-validate, strict: unknown fields refused), then
//! the probes, volumes, securityContext, image, Secret mount and serve's
//! arguments docs/operations.md promises, and a termination grace of at least
//! `--drain-timeout` plus [`STOP_AFTER_DRAIN_MAX`] (the script gets it from
//! here, so the manifests follow the code). The container itself runs in
//! `container.rs`.

use std::process::Command;

use toolhost::mcp::drain::STOP_AFTER_DRAIN_MAX;

#[test]
fn kubernetes_manifests_match_the_schemas_and_the_documented_deployment() {
    let root = crate::repo::root();
    let python = crate::support::venv_python("the manifests check (kubernetes-validate)");
    let out = Command::new(&python)
        .arg("tests/deploy/manifests.py")
        .env(
            "TOOLHOST_STOP_AFTER_DRAIN_MAX_SECS",
            STOP_AFTER_DRAIN_MAX.as_secs().to_string(),
        )
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
    assert_eq!(oks.len(), 7, "{stdout}");
}
