//! `toolhost plugin add oci://… | list | remove | update | publish | gc`
//! through the real binary, against a real registry on loopback (Debian's
//! docker-registry, started by `toolhost_test_support::registry`), with
//! artifacts pushed by oras-py and signed by sigstore-js: what is installed
//! is what was checked, a refusal leaves `plugins.lock` byte for byte, and
//! the host calls what the lock names.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use toolhost_test_support::registry::{Auth, TestRegistry};

use crate::support::{describe, dirs, stdout, toolhost};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

/// The v0.1.0 compat fixture (the Rust example, id `example_rust`).
fn fixture() -> PathBuf {
    root().join("tests/fixtures/compat/v0.1.0/example.wasm")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `toolhost plugin ARGS --state-dir STATE`, stdin closed (no terminal),
/// with `env` set.
fn plugin(state: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    cmd.arg("plugin")
        .args(args)
        .arg("--state-dir")
        .arg(state)
        .env_remove("TOOLHOST_LOG")
        .env_remove("REGISTRY_AUTH_FILE")
        .env("DOCKER_CONFIG", state.join("no-docker-config"))
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn lock(state: &Path) -> Vec<u8> {
    std::fs::read(state.join("plugins/plugins.lock")).unwrap_or_default()
}

fn blobs(state: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(state.join("plugins/blobs/sha256"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn sha256_hex(bytes: &[u8]) -> String {
    toolhost_runtime::sha256_hex(bytes)
}

/// The lock's `added` of `id` (the one field a test cannot know ahead).
fn added(state: &Path, id: &str) -> String {
    let text = String::from_utf8(lock(state)).unwrap();
    let lock: toml::Table = toml::from_str(&text).unwrap();
    lock["plugin"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"].as_str() == Some(id))
        .unwrap()["added"]
        .to_string()
}

#[test]
fn add_by_tag_and_by_digest_list_call_remove_and_gc() {
    let registry = TestRegistry::start(Auth::Anonymous).unwrap();
    let host = registry.host.clone();
    let component = std::fs::read(fixture()).unwrap();
    let digest = registry.push_wasm("plugins/example:1", &component).unwrap();
    let (ws, state) = dirs();
    let state = state.path();
    let manifest = fixture().with_extension("toml");
    let by_tag = format!("oci://{host}/plugins/example:1");

    let out = plugin(
        state,
        &[
            "add",
            &by_tag,
            "--insecure-registry",
            &host,
            "--allow-unsigned",
            "--manifest",
            manifest.to_str().unwrap(),
            "--yes",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "added plugin `example_rust` from {by_tag} ({digest}); compiled code cached in {}\n",
            state.join("compiled").display()
        )
    );
    // What it is granted was shown before it was installed.
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "plugin `example_rust` will be installed:\nsource     {by_tag}@{digest}\n\
             resolved   {host}/plugins/example@{digest}\n"
        )),
        "{err}"
    );
    assert!(
        err.contains("signature  unsigned (--allow-unsigned)\n"),
        "{err}"
    );
    assert!(
        err.contains("tools      greet, now\ngrants:\n  exec       date -u\n"),
        "{err}"
    );
    assert!(err.contains("  sampling   no\n"), "{err}");
    let hex = sha256_hex(&component);
    assert_eq!(blobs(state), std::slice::from_ref(&hex));

    // The host loads what the lock names: `toolhost call` of its tool.
    let out = toolhost(
        ws.path(),
        state,
        &["call", "--json", "greet", r#"{"name":"Ada"}"#],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        serde_json::from_str::<Value>(&stdout(&out)).unwrap()["text"],
        json!("Hello, Ada!")
    );

    // list, exact.
    let out = plugin(state, &["list"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let when = added(state, "example_rust");
    let short = &digest[..19];
    let source_w = by_tag.len().max("SOURCE".len());
    assert_eq!(
        stdout(&out),
        format!(
            "ID            {:<source_w$}  DIGEST               SIGNER                       ADDED\n\
             example_rust  {by_tag:<source_w$}  {short}  unsigned (--allow-unsigned)  {when}\n",
            "SOURCE"
        )
    );
    let out = plugin(state, &["list", "--json"], &[]);
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        listed,
        json!([{
            "id": "example_rust",
            "source": by_tag,
            "resolved": format!("{host}/plugins/example@{digest}"),
            "digest": digest,
            "component_sha256": hex,
            "size": component.len(),
            "contract": "0.1.0",
            "signature": {"kind": "none", "identity": null, "issuer": null, "key_sha256": null},
            "added": when,
            "updated": null,
            "manifest_from": format!("file:{}", manifest.display()),
        }])
    );

    // A second add of the same id is refused, the lock untouched.
    let before = lock(state);
    let out = plugin(
        state,
        &[
            "add",
            &by_tag,
            "--insecure-registry",
            &host,
            "--allow-unsigned",
            "--manifest",
            manifest.to_str().unwrap(),
            "--yes",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert_eq!(
        stderr(&out).lines().last().unwrap(),
        format!(
            "toolhost: plugin `example_rust` is already installed from {by_tag}: `toolhost \
             plugin update example_rust` re-resolves it, `toolhost plugin remove example_rust` \
             removes it"
        )
    );
    assert_eq!(lock(state), before);

    // remove, then the blob and its compiled code go with gc.
    let out = plugin(state, &["remove", "example_rust"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "removed plugin `example_rust` ({by_tag}); its blob stays until `toolhost plugin gc`\n"
        )
    );
    let out = plugin(state, &["list"], &[]);
    assert_eq!(
        stdout(&out),
        format!(
            "no plugins installed in {}\n",
            state.join("plugins").display()
        )
    );
    let out = plugin(state, &["remove", "example_rust"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "toolhost: no plugin `example_rust` is installed in {}\n",
            state.join("plugins").display()
        )
    );
    let cwasm = |state: &Path| {
        std::fs::read_dir(state.join("compiled"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&hex))
            .count()
    };
    assert_eq!(cwasm(state), 1);
    let out = plugin(state, &["gc"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        stdout(&out).starts_with(&format!(
            "removed 1 unused blobs ({} KB) and ",
            component.len() / 1000
        )),
        "{}",
        describe(&out)
    );
    assert_eq!(blobs(state), Vec::<String>::new());
    assert_eq!(cwasm(state), 0);

    // By digest: pinned, so update has nothing to do.
    let by_digest = format!("oci://{host}/plugins/example@{digest}");
    let out = plugin(
        state,
        &[
            "add",
            &by_digest,
            "--insecure-registry",
            &host,
            "--allow-unsigned",
            "--manifest",
            manifest.to_str().unwrap(),
            "--yes",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let before = lock(state);
    let out = plugin(state, &["update", "example_rust"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "plugin `example_rust` is pinned to {host}/plugins/example@{digest}: nothing to \
             update\n"
        )
    );
    assert_eq!(lock(state), before);
}

#[test]
fn every_refusal_names_why_and_leaves_the_lock_byte_for_byte() {
    let registry = TestRegistry::start(Auth::Anonymous).unwrap();
    let host = registry.host.clone();
    let component = std::fs::read(fixture()).unwrap();
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();
    let manifest = fixture().with_extension("toml");
    let m = manifest.to_str().unwrap();
    // Something installed first, so "unchanged" is a lock with content.
    registry.push_wasm("plugins/example:1", &component).unwrap();
    let out = plugin(
        state,
        &[
            "add",
            &format!("oci://{host}/plugins/example:1"),
            "--insecure-registry",
            &host,
            "--allow-unsigned",
            "--manifest",
            m,
            "--yes",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let before = lock(state);
    let before_blobs = blobs(state);
    assert!(!before.is_empty());

    let mut other = component.clone();
    // Another component: the same code with a trailing custom section.
    other.extend_from_slice(&[0, 6, 5, b'o', b't', b'h', b'e', b'r']);
    registry.push_wasm("plugins/other:1", &other).unwrap();
    let other_ref = format!("oci://{host}/plugins/other:1");
    let other_toml = state.join("other.toml");
    std::fs::write(&other_toml, "id = \"other\"\ncontract = \"0.1.0\"\n").unwrap();
    let ot = other_toml.to_str().unwrap();

    let check = |args: &[&str], code: i32, expect: &str| {
        let out = plugin(state, args, &[]);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{args:?}: {}",
            describe(&out)
        );
        assert!(
            stderr(&out).contains(expect),
            "{args:?}: {}",
            describe(&out)
        );
        assert_eq!(lock(state), before, "{args:?}");
        assert_eq!(blobs(state), before_blobs, "{args:?}");
        let staging = std::fs::read_dir(state.join("plugins/staging"))
            .unwrap()
            .count();
        assert_eq!(staging, 0, "{args:?}");
    };

    // Plain HTTP only when named.
    check(
        &[
            "add",
            &other_ref,
            "--allow-unsigned",
            "--manifest",
            ot,
            "--yes",
        ],
        2,
        &format!(
            "https://{host} did not answer TLS; if it is a plain-HTTP registry, name it with --insecure-registry {host}"
        ),
    );
    // No signature policy: refused by default.
    check(
        &[
            "add",
            &other_ref,
            "--insecure-registry",
            &host,
            "--manifest",
            ot,
            "--yes",
        ],
        2,
        "toolhost: no signature policy given: pass --verify-identity ID --verify-issuer URL, \
         --verify-key PEM, or --allow-unsigned\n",
    );
    // Asked for a signer, found none.
    check(
        &[
            "add",
            &other_ref,
            "--insecure-registry",
            &host,
            "--verify-identity",
            "signer@example.test",
            "--verify-issuer",
            "https://issuer.example.test",
            "--manifest",
            ot,
            "--yes",
        ],
        1,
        "\n  expected: keyless signature by identity signer@example.test, issuer \
         https://issuer.example.test",
    );
    // No terminal, no --yes: nothing installed.
    check(
        &[
            "add",
            &other_ref,
            "--insecure-registry",
            &host,
            "--allow-unsigned",
            "--manifest",
            ot,
        ],
        2,
        "toolhost: not installed: no terminal to confirm on (pass --yes to accept these grants \
         non-interactively)\n",
    );
    // A manifest whose contract is not the component's world, naming both.
    let wrong = state.join("wrong.toml");
    std::fs::write(&wrong, "id = \"other\"\ncontract = \"0.2.0\"\n").unwrap();
    check(
        &[
            "add",
            &other_ref,
            "--insecure-registry",
            &host,
            "--allow-unsigned",
            "--manifest",
            wrong.to_str().unwrap(),
            "--yes",
        ],
        1,
        "its manifest says `contract = \"0.2.0\"` but the component was built for contract \
         0.1.0",
    );
    // Not a wasm artifact: an image config and a text layer.
    let work = tempfile::tempdir().unwrap();
    let text = work.path().join("notes.txt");
    std::fs::write(&text, "hello").unwrap();
    let config = work.path().join("config.json");
    std::fs::write(&config, "{}").unwrap();
    let image = registry
        .push(
            "plugins/image:1",
            &text,
            "text/plain",
            &config,
            "application/vnd.oci.image.config.v1+json",
        )
        .unwrap();
    check(
        &[
            "add",
            &format!("oci://{host}/plugins/image:1"),
            "--insecure-registry",
            &host,
            "--allow-unsigned",
            "--yes",
        ],
        1,
        &format!(
            "toolhost: oci://{host}/plugins/image:1 ({image}): not a wasm component artifact: "
        ),
    );
    // An unknown digest.
    let unknown = format!("sha256:{}", "0".repeat(64));
    check(
        &[
            "add",
            &format!("oci://{host}/plugins/other@{unknown}"),
            "--insecure-registry",
            &host,
            "--allow-unsigned",
            "--yes",
        ],
        1,
        &format!("toolhost: manifest {unknown} not found in {host}/plugins/other\n"),
    );
    // A tampered blob (same size, other bytes), named by its digest.
    let layer = format!("sha256:{}", sha256_hex(&other));
    let stored = registry.blob_path(&layer);
    let mut bytes = std::fs::read(&stored).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    std::fs::write(&stored, &bytes).unwrap();
    check(
        &[
            "add",
            &other_ref,
            "--insecure-registry",
            &host,
            "--allow-unsigned",
            "--manifest",
            ot,
            "--yes",
        ],
        1,
        &format!(
            "expected {layer}, got sha256:{}; nothing was installed",
            sha256_hex(&bytes)
        ),
    );
    // A layer over --max-size, refused before it is downloaded.
    check(
        &[
            "add",
            &format!("oci://{host}/plugins/example:1"),
            "--insecure-registry",
            &host,
            "--allow-unsigned",
            "--max-size",
            "1KiB",
            "--yes",
        ],
        1,
        "-byte cap (--max-size): nothing was downloaded",
    );
}

#[test]
fn a_moved_tag_changes_nothing_until_update_and_publish_reads_back_with_oras() {
    let registry = TestRegistry::start(Auth::Anonymous).unwrap();
    let host = registry.host.clone();
    let component = std::fs::read(fixture()).unwrap();
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();
    let src = tempfile::tempdir().unwrap();
    let wasm = src.path().join("example.wasm");
    std::fs::write(&wasm, &component).unwrap();
    let toml = src.path().join("example.toml");
    std::fs::copy(fixture().with_extension("toml"), &toml).unwrap();
    let target = format!("oci://{host}/plugins/pub:stable");

    // Published with its manifest; oras pulls the component back.
    let out = plugin(
        state,
        &[
            "publish",
            wasm.to_str().unwrap(),
            &target,
            "--insecure-registry",
            &host,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let first = registry.manifest("plugins/pub", "stable").unwrap();
    let first = format!("sha256:{}", sha256_hex(&first));
    assert_eq!(
        stdout(&out),
        format!("published plugin `example_rust` to {target} as {host}/plugins/pub@{first}\n")
    );
    let pulled = tempfile::tempdir().unwrap();
    let files = registry.pull("plugins/pub:stable", pulled.path()).unwrap();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].ends_with("example_rust.wasm"), "{files:?}");
    assert_eq!(std::fs::read(&files[0]).unwrap(), component);

    // Installed with the artifact's own manifest.
    let out = plugin(
        state,
        &[
            "add",
            &target,
            "--insecure-registry",
            &host,
            "--allow-unsigned",
            "--yes",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        stderr(&out).contains("manifest   artifact\n"),
        "{}",
        describe(&out)
    );
    let installed = lock(state);

    // The tag moves: a wider grant.
    let text = std::fs::read_to_string(&toml)
        .unwrap()
        .replace("exec = [\"date -u\"]", "exec = [\"date -u\", \"uname\"]");
    std::fs::write(&toml, text).unwrap();
    let out = plugin(
        state,
        &[
            "publish",
            wasm.to_str().unwrap(),
            &target,
            "--insecure-registry",
            &host,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let second = registry.manifest("plugins/pub", "stable").unwrap();
    let second = format!("sha256:{}", sha256_hex(&second));
    assert_ne!(first, second);
    // Nothing changed for the host...
    assert_eq!(lock(state), installed);
    let out = plugin(state, &["list", "--json"], &[]);
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(listed[0]["digest"], json!(first));

    // ...until update, which shows the change and wants a confirmation.
    let out = plugin(state, &["update", "example_rust"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "plugin `example_rust`: {target} moved from {first} to {second}\n\
             manifest changes:\n  - exec = [\"date -u\"]\n  + exec = [\"date -u\", \"uname\"]\n"
        )),
        "{err}"
    );
    assert!(
        err.contains("grants:\n  exec       date -u, uname\n"),
        "{err}"
    );
    assert!(
        err.ends_with(
            "toolhost: not updated: no terminal to confirm on (pass --yes to accept these \
             grants non-interactively)\n"
        ),
        "{err}"
    );
    assert_eq!(lock(state), installed);
    let out = plugin(state, &["update", "example_rust", "--yes"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        stdout(&out),
        format!("updated plugin `example_rust` to {second} ({target})\n")
    );
    let out = plugin(state, &["list", "--json"], &[]);
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(listed[0]["digest"], json!(second));
    assert!(listed[0]["updated"].is_string(), "{listed}");
    let out = plugin(state, &["update", "example_rust"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        stdout(&out),
        format!("plugin `example_rust` is up to date: {target} still resolves to {second}\n")
    );
}

#[test]
fn signatures_a_good_signer_is_accepted_another_identity_refused() {
    let registry = TestRegistry::start(Auth::Htpasswd).unwrap();
    let host = registry.host.clone();
    let component = std::fs::read(fixture()).unwrap();
    let mut other = component.clone();
    other.extend_from_slice(&[0, 6, 5, b'o', b't', b'h', b'e', b'r']);
    let good = registry.push_wasm("plugins/good:1", &component).unwrap();
    let bad = registry.push_wasm("plugins/bad:1", &other).unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = registry
        .sign_keyless(
            work.path(),
            &[
                ("signer@example.test", "plugins/good", &good, None),
                ("mallory@example.test", "plugins/bad", &bad, None),
            ],
        )
        .unwrap();
    let auth = work.path().join("auth.json");
    std::fs::write(&auth, registry.docker_config("tester", "s3cret-pw")).unwrap();
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();
    let manifest = fixture().with_extension("toml");
    let other_toml = work.path().join("other.toml");
    std::fs::write(&other_toml, "id = \"other\"\ncontract = \"0.1.0\"\n").unwrap();
    let add = |repo: &str, m: &Path| {
        plugin(
            state,
            &[
                "add",
                &format!("oci://{host}/{repo}:1"),
                "--insecure-registry",
                &host,
                "--verify-identity",
                "signer@example.test",
                "--verify-issuer",
                "https://issuer.example.test",
                "--trusted-root",
                root.to_str().unwrap(),
                "--manifest",
                m.to_str().unwrap(),
                "--yes",
            ],
            &[("REGISTRY_AUTH_FILE", &auth)],
        )
    };
    let out = add("plugins/good", &manifest);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        stderr(&out).contains("signature  signer@example.test (https://issuer.example.test)\n"),
        "{}",
        describe(&out)
    );
    let before = lock(state);
    let text = String::from_utf8(before.clone()).unwrap();
    assert!(
        text.contains("kind = \"keyless\"\nidentity = \"signer@example.test\"\n"),
        "{text}"
    );

    let out = add("plugins/bad", &other_toml);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!(
            "toolhost: refused oci://{host}/plugins/bad:1@{bad} ({bad}): "
        )),
        "{err}"
    );
    assert!(err.contains("mallory@example.test"), "{err}");
    assert_eq!(lock(state), before);
    let out = plugin(state, &["list"], &[]);
    assert!(
        stdout(&out).contains("signer@example.test (https://issuer.example.test)"),
        "{}",
        describe(&out)
    );
}

#[test]
fn a_key_signature_is_accepted_by_its_key_refused_by_another_and_recorded_for_update() {
    let registry = TestRegistry::start(Auth::Htpasswd).unwrap();
    let host = registry.host.clone();
    let component = std::fs::read(fixture()).unwrap();
    let digest = registry.push_wasm("plugins/keyed:1", &component).unwrap();
    let work = tempfile::tempdir().unwrap();
    let (private_a, public_a) = registry.make_key(work.path(), "a").unwrap();
    let (_, public_b) = registry.make_key(work.path(), "b").unwrap();
    let root = registry
        .sign_with_key(
            &work.path().join("sig"),
            &private_a,
            "plugins/keyed",
            &digest,
        )
        .unwrap();
    let auth = work.path().join("auth.json");
    std::fs::write(&auth, registry.docker_config("tester", "s3cret-pw")).unwrap();
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();
    let manifest = fixture().with_extension("toml");
    let source = format!("oci://{host}/plugins/keyed:1");
    let add = |key: &Path| {
        plugin(
            state,
            &[
                "add",
                &source,
                "--insecure-registry",
                &host,
                "--verify-key",
                key.to_str().unwrap(),
                "--trusted-root",
                root.to_str().unwrap(),
                "--manifest",
                manifest.to_str().unwrap(),
                "--yes",
            ],
            &[("REGISTRY_AUTH_FILE", &auth)],
        )
    };
    let out = add(&public_b);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "  expected: signature by the key in {}",
            public_b.display()
        )),
        "{err}"
    );
    assert_eq!(lock(state), Vec::<u8>::new());
    let out = add(&public_a);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        stderr(&out).contains("signature  key sha256:"),
        "{}",
        describe(&out)
    );
    let text = String::from_utf8(lock(state)).unwrap();
    assert!(
        text.contains(&format!("key_file = \"{}\"", public_a.display())),
        "{text}"
    );
    // update verifies under the recorded key and root without any flag.
    let out = plugin(
        state,
        &["update", "example_rust"],
        &[("REGISTRY_AUTH_FILE", &auth)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        stdout(&out),
        format!("plugin `example_rust` is up to date: {source} still resolves to {digest}\n")
    );
}
