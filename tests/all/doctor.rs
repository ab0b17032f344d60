//! `toolhost doctor` and `--require-sandbox` through the real binary
//! (`host/toolhost/src/doctor.rs`, `sandbox_layers.rs`; docs/cli.md): every
//! layer reported with the facts the sandbox tests rely on (the kernel probe
//! of this very machine, `toolhost_process::probe_kernel`), the exit codes,
//! and a start refused with exit 69 when a required layer is missing. The
//! layer is made missing for real with `--process-tracking subreaper` (no
//! cgroup is created, so there is no `cgroup_v2`); the container test
//! (`container.rs`) takes the mount namespace away with a runtime's seccomp
//! profile.

use std::process::Output;

use serde_json::{Value, json};

use crate::support::{allow_all_policy, describe, dirs, stdout, toolhost};

const LAYERS: [&str; 6] = [
    "user_namespace",
    "mount_namespace",
    "landlock",
    "seccomp",
    "cgroup_v2",
    "network",
];

fn doctor_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(out)))
}

/// The layer named `name` of a doctor report.
fn layer<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("no layer {name} in {report}"))
}

#[test]
fn doctor_json_reports_every_layer_as_the_kernel_probe_finds_it() {
    let (ws, state) = dirs();
    let out = toolhost(ws.path(), state.path(), &["doctor", "--json"]);
    let report = doctor_json(&out);
    let names: Vec<&str> = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, LAYERS, "{report}");

    // Each layer: available or not; a missing one says why, what it needs and
    // what is lost, an available one none of that.
    for l in report["layers"].as_array().unwrap() {
        let available = l["available"].as_bool().unwrap();
        assert!(l["detail"].as_str().is_some_and(|d| !d.is_empty()), "{l}");
        for field in ["reason", "needs", "without"] {
            assert_eq!(
                l[field].is_string(),
                !available,
                "{field} of {}: {l}",
                l["name"]
            );
        }
    }

    // The same facts the sandbox tests read in this process.
    let k = toolhost_process::probe_kernel();
    assert_eq!(
        layer(&report, "user_namespace")["available"],
        k.user_namespaces
    );
    assert_eq!(
        layer(&report, "mount_namespace")["available"],
        k.mount_namespace
    );
    assert_eq!(layer(&report, "seccomp")["available"], k.seccomp);
    assert_eq!(layer(&report, "network")["available"], k.seccomp);
    assert_eq!(
        layer(&report, "landlock")["available"],
        k.landlock_abi.is_some()
    );
    assert_eq!(layer(&report, "landlock")["abi"], json!(k.landlock_abi));
    // `exec_sandbox` and the other sandbox tests assume Landlock, seccomp and
    // the mount namespace on the machines they run on.
    for name in ["landlock", "seccomp", "mount_namespace", "network"] {
        assert_eq!(layer(&report, name)["available"], true, "{name}: {report}");
    }

    // `/info`'s sandbox object, `layers` included, from the same source.
    let sandbox = &report["sandbox"];
    assert_eq!(sandbox["mode"], "workspace-write");
    assert_eq!(sandbox["kernel"]["landlock_abi"], json!(k.landlock_abi));
    assert_eq!(sandbox["network_blocked"], true);
    for name in LAYERS {
        assert_eq!(
            sandbox["layers"][name],
            layer(&report, name)["available"],
            "{name}"
        );
    }

    // What `toolhost tools` prints for the same options.
    let tools = stdout(&toolhost(ws.path(), state.path(), &["tools"]));
    let line = |prefix: &str| {
        tools
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in {tools}"))
            .to_owned()
    };
    assert_eq!(
        report["commands_run_under"],
        line("commands run under: "),
        "{report}"
    );
    assert_eq!(report["process_tracking"], line("process tracking: "));

    assert_eq!(report["contract_versions"], json!(["0.1.0", "0.2.0"]));
    assert_eq!(report["mcp_protocol_versions"][0], "2026-07-28");
    assert_eq!(
        report["state_dir"],
        json!({"path": state.path().to_str().unwrap(), "writable": true})
    );
    let plugins = &report["plugins"];
    assert_eq!(plugins["loadable"], true, "{report}");
    assert_eq!(plugins["ids"], json!(["bash"]));
    assert_eq!(plugins["skipped"], json!([]));
    assert_eq!(plugins["error"], Value::Null);

    // Exit 0 exactly when nothing failed; `failed` names what is missing.
    let missing: Vec<&str> = LAYERS
        .into_iter()
        .filter(|n| layer(&report, n)["available"] == false)
        .collect();
    assert_eq!(report["failed"], json!(missing));
    assert_eq!(report["ok"], missing.is_empty());
    assert_eq!(
        out.status.code(),
        Some(if missing.is_empty() { 0 } else { 1 }),
        "{}",
        describe(&out)
    );
}

#[test]
fn doctor_fails_with_exit_1_and_says_why_when_a_layer_is_missing() {
    let (ws, state) = dirs();
    let out = toolhost(
        ws.path(),
        state.path(),
        &["doctor", "--json", "--process-tracking", "subreaper"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let report = doctor_json(&out);
    assert_eq!(report["ok"], false);
    assert!(
        report["failed"]
            .as_array()
            .unwrap()
            .contains(&json!("cgroup_v2")),
        "{report}"
    );
    let cgroup = layer(&report, "cgroup_v2");
    assert_eq!(cgroup["available"], false);
    assert!(
        cgroup["reason"]
            .as_str()
            .unwrap()
            .starts_with("process tracking: subreaper and /proc scan"),
        "{cgroup}"
    );
    assert!(
        cgroup["needs"]
            .as_str()
            .unwrap()
            .contains("--process-tracking auto"),
        "{cgroup}"
    );

    // The text report names it too, on stdout, and the verdict on stderr.
    let out = toolhost(
        ws.path(),
        state.path(),
        &["doctor", "--process-tracking", "subreaper"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.starts_with("  cgroup_v2        NO   process tracking: subreaper")),
        "{text}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("toolhost doctor: missing: "),
        "{}",
        describe(&out)
    );
}

#[test]
fn require_sandbox_refuses_to_start_with_exit_69_when_a_layer_is_missing() {
    let (ws, state) = dirs();
    let policy = allow_all_policy(state.path());
    let marker = ws.path().join("ran");
    let command = json!({"command": format!("touch {}", marker.display())}).to_string();
    let call = |extra: &[&str]| {
        let mut args = vec![
            "call",
            "bash",
            command.as_str(),
            "--policy",
            policy.as_str(),
        ];
        args.extend_from_slice(extra);
        toolhost(ws.path(), state.path(), &args)
    };

    let out = call(&[
        "--process-tracking",
        "subreaper",
        "--require-sandbox",
        "landlock,cgroup_v2",
    ]);
    assert_eq!(out.status.code(), Some(69), "{}", describe(&out));
    assert_eq!(stdout(&out), "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(
            "toolhost: refusing to start: --require-sandbox names layers this host does not \
             have: cgroup_v2 (process tracking: subreaper and /proc scan, no process limit \
             (cgroups not used by configuration"
        ),
        "{stderr}"
    );
    assert!(!marker.exists(), "the command ran");

    // `serve` too, before it serves anything, with the failure in its log.
    let out = toolhost(
        ws.path(),
        state.path(),
        &[
            "serve",
            "--process-tracking",
            "subreaper",
            "--require-sandbox",
            "all",
        ],
    );
    assert_eq!(out.status.code(), Some(69), "{}", describe(&out));
    let hosts: Vec<_> = std::fs::read_dir(state.path().join("hosts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let [host] = hosts.as_slice() else {
        panic!("{hosts:?}")
    };
    let events = std::fs::read_to_string(host.join("events.jsonl")).unwrap();
    let last: Value = serde_json::from_str(events.lines().last().unwrap()).unwrap();
    assert_eq!(last["kind"], "lifecycle", "{events}");
    assert_eq!(last["state"], "failed", "{events}");
    assert!(
        last["message"].as_str().unwrap().starts_with(
            "the host could not start: refusing to start: --require-sandbox names layers"
        ),
        "{events}"
    );
    assert!(!events.contains("\"running\""), "{events}");

    // The layers this machine has: the call runs.
    let have = ["landlock", "seccomp", "mount_namespace", "network"].join(",");
    let out = call(&["--require-sandbox", &have]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(marker.exists());
}

#[test]
fn require_sandbox_rejects_unknown_layers_and_contradictions_as_usage_errors() {
    let (ws, state) = dirs();
    let usage = |args: &[&str], expected: &str| {
        let out = toolhost(ws.path(), state.path(), args);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{stderr}");
    };
    usage(
        &[
            "call",
            "bash",
            "{}",
            "--require-sandbox",
            "landlock,cgroups",
        ],
        "unknown sandbox layer `cgroups`: use all, or a comma-separated list of \
         user_namespace, mount_namespace, landlock, seccomp, cgroup_v2, network",
    );
    usage(
        &[
            "call",
            "bash",
            "{}",
            "--require-sandbox",
            "network",
            "--allow-network",
        ],
        "toolhost: --require-sandbox network contradicts --allow-network",
    );
    usage(
        &[
            "serve",
            "--require-sandbox",
            "landlock",
            "--sandbox",
            "full-access",
        ],
        "toolhost: --require-sandbox contradicts --sandbox full-access",
    );
}
