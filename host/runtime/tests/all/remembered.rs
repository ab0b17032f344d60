//! A remembered answer covers only what was approved
//! (docs/permissions.md#what-a-rule-and-an-answer-cover), through the real
//! built-in bash plugin, the hostile plugin (`tests/plugins/hostile`) and the
//! built-in default policy, which asks before running a script by path:
//!
//! - `allow_always` for `./run.sh` in one directory does not run another
//!   directory's `run.sh` unasked;
//! - `allow_always` given to the bash tool does not approve another plugin's
//!   request that is the same in every other way (program, cwd, command,
//!   shell, no environment, stdin closed);
//! - the event log says which earlier answer settled a remembered start.

use std::os::unix::fs::PermissionsExt;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde_json::json;
use toolhost_runtime::{
    ApprovalOutcome, ApprovalRequest, Approver, Host, HostConfig, HostEventKind, HostSessionLog,
};

use crate::support::{add_hostile, dirs, use_cache};

/// Answers `allow_always` to everything and records what it was asked.
#[derive(Default)]
struct Always(Mutex<Vec<ApprovalRequest>>);

impl Approver for Always {
    fn name(&self) -> &str {
        "always"
    }
    fn ask<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn std::future::Future<Output = Option<ApprovalOutcome>> + Send + 'a>> {
        self.0.lock().unwrap().push(request.clone());
        Box::pin(async { Some(ApprovalOutcome::AllowAlways) })
    }
}

fn script(path: &std::path::Path, says: &str) {
    std::fs::write(path, format!("#!/bin/sh\necho {says}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_answer_covers_its_directory_and_its_plugin_only() {
    let plugins = tempfile::tempdir().unwrap();
    let hostile = add_hostile(plugins.path(), "hostile", None, "exec = [\"**\"]\n");
    let (ws, state) = dirs();
    use_cache(state.path());
    for dir in ["a", "b"] {
        std::fs::create_dir(ws.path().join(dir)).unwrap();
        script(&ws.path().join(dir).join("run.sh"), &format!("ran-{dir}"));
    }
    script(&ws.path().join("run.sh"), "ran-root");
    let log = Arc::new(HostSessionLog::open(state.path(), None).unwrap());
    let mut config = HostConfig::new(ws.path(), state.path());
    config.plugins = vec![hostile];
    config.events = Some(log.clone());
    let host = Host::new(config).await.unwrap();
    let person = Arc::new(Always::default());
    host.permissions().add_approver(person.clone());
    let asked = || person.0.lock().unwrap().len();
    let bash = async |args: serde_json::Value| host.call_tool("bash", args).await.unwrap();

    let here = json!({"command": "./run.sh", "cwd": "a"});
    assert_eq!(bash(here.clone()).await.text(), "ran-a");
    assert_eq!(asked(), 1);
    assert_eq!(bash(here).await.text(), "ran-a");
    assert_eq!(
        asked(),
        1,
        "the same request in the same directory is remembered"
    );
    // The same text in another directory names another program: asked.
    let there = bash(json!({"command": "./run.sh", "cwd": "b"})).await;
    assert_eq!(there.text(), "ran-b");
    assert_eq!(asked(), 2);

    // Allowed always for the bash tool, in the workspace root.
    assert_eq!(
        bash(json!({"command": "./run.sh"})).await.text(),
        "ran-root"
    );
    assert_eq!(asked(), 3);
    let for_bash = person.0.lock().unwrap()[2].clone();
    // The hostile plugin asks for exactly that request: asked again.
    let shell = host.sessions().shell().path.display().to_string();
    let other = host
        .call_tool("exec", json!({"command": "./run.sh", "shell": shell}))
        .await
        .unwrap();
    assert!(other.text().starts_with("ok: \"bg_"), "{}", other.text());
    assert_eq!(
        asked(),
        4,
        "another plugin's request is not the bash tool's"
    );
    let for_hostile = person.0.lock().unwrap()[3].clone();
    assert_eq!(for_hostile.plugin, "hostile");
    assert_eq!(
        (
            &for_hostile.program,
            &for_hostile.cwd,
            &for_hostile.command,
            &for_hostile.shell,
            &for_hostile.env_names,
            &for_hostile.stdin,
        ),
        (
            &for_bash.program,
            &for_bash.cwd,
            &for_bash.command,
            &for_bash.shell,
            &for_bash.env_names,
            &for_bash.stdin,
        ),
        "the two requests differ only in who asks"
    );
    let root = ws.path().canonicalize().unwrap();
    assert_eq!(
        for_bash.program.as_deref(),
        Some(root.join("run.sh").to_str().unwrap())
    );

    // The remembered start names the answer that allowed it.
    let first = person.0.lock().unwrap()[0].request_id.clone();
    let resolutions: Vec<(String, String, Option<String>)> = log
        .replay(0, 10_000)
        .events
        .into_iter()
        .filter_map(|e| match e.event().unwrap().kind {
            HostEventKind::PermissionResolved {
                request_id,
                by,
                remembered_from,
                ..
            } => Some((request_id, by, remembered_from)),
            _ => None,
        })
        .collect();
    let by: Vec<(&str, Option<&str>)> = resolutions
        .iter()
        .map(|(_, by, from)| (by.as_str(), from.as_deref()))
        .collect();
    assert_eq!(
        by,
        [
            ("always", None),
            ("remembered", Some(first.as_str())),
            ("always", None),
            ("always", None),
            ("always", None),
        ]
    );
    assert_ne!(
        resolutions[1].0, first,
        "the remembered start has its own id"
    );
}
