//! toolhost-registry against a real registry (CNCF distribution, started on
//! loopback per test), with artifacts pushed by oras-py and signed by
//! sigstore-js: nothing here was pushed or signed by this crate's own code,
//! except the publish round trip, which oras-py reads back.
//!
//! Cost: each test starts its own registry (~0.1 s) and runs oras-py once or
//! twice (~0.3 s each); the signature tests run node once (~1-3 s).

use std::path::Path;

use toolhost_registry::fetch::DEFAULT_LAYER_MAX;
use toolhost_registry::{
    Insecure, Policy, PullOptions, Reference, RegistryError, TrustRoot, resolve,
};
use toolhost_test_support::registry::{Auth, TestRegistry, tiny_component};

fn unsigned(registry: &TestRegistry) -> PullOptions {
    PullOptions {
        insecure: Insecure::new([registry.host.clone()]).unwrap(),
        max_size: DEFAULT_LAYER_MAX,
        policy: Policy::AllowUnsigned,
        root: TrustRoot::Public,
    }
}

fn reference(registry: &TestRegistry, rest: &str) -> Reference {
    Reference::parse(&format!("oci://{}/{rest}", registry.host)).unwrap()
}

/// Pulls `reference` under `options` into `dir/layer.part`.
async fn pull(
    reference: &Reference,
    options: &PullOptions,
    dir: &Path,
) -> Result<Vec<u8>, RegistryError> {
    let resolved = resolve(reference, options).await?;
    resolved.config().await?;
    let path = dir.join("layer.part");
    resolved.download_layer(&path).await?;
    Ok(std::fs::read(path).unwrap())
}

#[tokio::test]
async fn pull_by_tag_and_by_digest_gives_the_pushed_bytes() {
    let registry = TestRegistry::start(Auth::Anonymous).unwrap();
    let component = tiny_component("by-tag");
    let digest = registry.push_wasm("plugins/x:1.0.0", &component).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let by_tag = reference(&registry, "plugins/x:1.0.0");
    let resolved = resolve(&by_tag, &unsigned(&registry)).await.unwrap();
    assert_eq!(resolved.artifact.digest.as_str(), digest);
    assert_eq!(resolved.artifact.reference.tag.as_deref(), Some("1.0.0"));
    assert_eq!(resolved.signature.kind, "none");
    assert_eq!(
        pull(&by_tag, &unsigned(&registry), dir.path())
            .await
            .unwrap(),
        component
    );
    let by_digest = reference(&registry, &format!("plugins/x@{digest}"));
    assert_eq!(
        pull(&by_digest, &unsigned(&registry), dir.path())
            .await
            .unwrap(),
        component
    );
}

#[tokio::test]
async fn a_tampered_blob_is_refused_naming_both_digests() {
    let registry = TestRegistry::start(Auth::Anonymous).unwrap();
    let component = tiny_component("tampered");
    let manifest = registry.push_wasm("plugins/t:1", &component).unwrap();
    let layer = toolhost_registry::Digest::of(&component);
    let path = registry.blob_path(layer.as_str());
    let mut bytes = std::fs::read(&path).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let got = toolhost_registry::Digest::of(&bytes);
    let dir = tempfile::tempdir().unwrap();
    let e = pull(
        &reference(&registry, "plugins/t:1"),
        &unsigned(&registry),
        dir.path(),
    )
    .await
    .unwrap_err();
    assert!(e.is_refusal());
    assert_eq!(
        e.to_string(),
        format!(
            "layer of oci://{}/plugins/t:1@{manifest} is not what its manifest says: expected \
             {layer}, got {got}; nothing was installed",
            registry.host
        )
    );
    assert!(!dir.path().join("x").exists());
}

#[tokio::test]
async fn an_unknown_digest_is_not_found() {
    let registry = TestRegistry::start(Auth::Anonymous).unwrap();
    registry
        .push_wasm("plugins/x:1", &tiny_component("unknown"))
        .unwrap();
    let zero = format!("sha256:{}1", "0".repeat(63));
    let e = resolve(
        &reference(&registry, &format!("plugins/x@{zero}")),
        &unsigned(&registry),
    )
    .await
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("manifest {zero} not found in {}/plugins/x", registry.host)
    );
    assert!(e.is_refusal());
}

#[tokio::test]
async fn an_image_is_refused_before_any_blob_is_fetched() {
    let registry = TestRegistry::start(Auth::Anonymous).unwrap();
    let work = tempfile::tempdir().unwrap();
    let layer = work.path().join("layer.tar");
    std::fs::write(&layer, vec![0u8; 10240]).unwrap();
    let config = work.path().join("config.json");
    std::fs::write(&config, r#"{"architecture":"amd64","os":"linux"}"#).unwrap();
    let digest = registry
        .push(
            "plugins/image:1",
            &layer,
            "application/vnd.oci.image.layer.v1.tar",
            &config,
            "application/vnd.oci.image.config.v1+json",
        )
        .unwrap();
    let before = registry.access_log().lines().count();
    let e = resolve(
        &reference(&registry, "plugins/image:1"),
        &unsigned(&registry),
    )
    .await
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "oci://{}/plugins/image:1 ({digest}): not a wasm component artifact: config \
             application/vnd.oci.image.config.v1+json, layers [application/vnd.oci.image.layer.v1.tar] \
             (expected config application/vnd.wasm.config.v0+json and one application/wasm layer)",
            registry.host
        )
    );
    let after: Vec<String> = registry
        .access_log()
        .lines()
        .skip(before)
        .map(String::from)
        .collect();
    assert!(
        !after.iter().any(|l| l.contains("/blobs/")),
        "no blob may be fetched: {after:?}"
    );
}

#[tokio::test]
async fn plain_http_needs_insecure_registry_and_is_never_a_fallback() {
    let registry = TestRegistry::start(Auth::Anonymous).unwrap();
    registry
        .push_wasm("plugins/x:1", &tiny_component("tls"))
        .unwrap();
    let options = PullOptions {
        insecure: Insecure::default(),
        ..unsigned(&registry)
    };
    let before = registry.access_log();
    let e = resolve(&reference(&registry, "plugins/x:1"), &options)
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "https://{0} did not answer TLS; if it is a plain-HTTP registry, name it with \
             --insecure-registry {0}",
            registry.host
        )
    );
    assert!(!e.is_refusal());
    assert_eq!(registry.access_log(), before, "no HTTP request reached it");
}

#[tokio::test]
async fn sizes_over_the_cap_are_refused_before_download_and_lying_sizes_mid_stream() {
    let registry = TestRegistry::start(Auth::Anonymous).unwrap();
    let component = tiny_component(&"big".repeat(40));
    registry
        .push_wasm("plugins/sizes:real", &component)
        .unwrap();
    let layer = toolhost_registry::Digest::of(&component);
    let real: serde_json::Value =
        serde_json::from_slice(&registry.manifest("plugins/sizes", "real").unwrap()).unwrap();
    let with_size = |size: u64| {
        let mut m = real.clone();
        m["layers"][0]["size"] = size.into();
        m.to_string()
    };
    // Declared over the cap: refused from the manifest, the layer never fetched.
    registry
        .put_manifest("plugins/sizes", "huge", &with_size(300_000_000))
        .unwrap();
    let e = resolve(
        &reference(&registry, "plugins/sizes:huge"),
        &unsigned(&registry),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(
        e.to_string(),
        format!(
            "layer {layer} declares 300000000 bytes, over the 268435456-byte cap (--max-size): \
             nothing was downloaded"
        )
    );
    assert!(!registry.blob_was_fetched(layer.as_str()));
    // Declared under what is sent: stopped, nothing kept.
    let declared = component.len() as u64 - 10;
    let lying = registry
        .put_manifest("plugins/sizes", "lying", &with_size(declared))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let e = pull(
        &reference(&registry, "plugins/sizes:lying"),
        &unsigned(&registry),
        dir.path(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "layer {layer} of oci://{}/plugins/sizes:lying@{lying}: sent more than the {declared} bytes \
             its manifest declares (Content-Length {}); nothing was installed",
            registry.host,
            component.len()
        )
    );
    // A smaller --max-size refuses the real one too.
    let small = PullOptions {
        max_size: 16,
        ..unsigned(&registry)
    };
    let e = resolve(&reference(&registry, "plugins/sizes:real"), &small)
        .await
        .err()
        .unwrap();
    assert!(matches!(e, RegistryError::TooLarge { cap: 16, .. }), "{e}");
}

#[tokio::test]
async fn credentials_come_from_the_files_and_a_refusal_names_the_file() {
    let registry = TestRegistry::start(Auth::Htpasswd).unwrap();
    let component = tiny_component("credentials");
    registry.push_wasm("plugins/private:1", &component).unwrap();
    let files = tempfile::tempdir().unwrap();
    let good = files.path().join("config.json");
    std::fs::write(&good, registry.docker_config("tester", "s3cret-pw")).unwrap();
    let bad = files.path().join("auth.json");
    std::fs::write(&bad, registry.docker_config("tester", "wrong")).unwrap();
    let r = reference(&registry, "plugins/private:1");
    let options = unsigned(&registry);
    let remote_with = |file: &Path| {
        let credential = toolhost_registry::auth::from_file(file, &registry.host)
            .unwrap()
            .unwrap();
        toolhost_registry::Remote::connect_with(
            &r,
            &options.insecure,
            toolhost_registry::Access::Pull,
            credential,
        )
    };
    let remote = remote_with(&good).await.unwrap();
    let resolved = toolhost_registry::resolve_with(remote, &r, &options)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    resolved
        .download_layer(&dir.path().join("x"))
        .await
        .unwrap();
    assert_eq!(std::fs::read(dir.path().join("x")).unwrap(), component);

    let remote = remote_with(&bad).await.unwrap();
    let e = toolhost_registry::resolve_with(remote, &r, &options)
        .await
        .err()
        .unwrap();
    assert_eq!(
        e.to_string(),
        format!(
            "401 from {} with the credential of user `tester` in {}",
            registry.host,
            bad.display()
        )
    );
    let anonymous = toolhost_registry::Remote::connect_with(
        &r,
        &options.insecure,
        toolhost_registry::Access::Pull,
        toolhost_registry::auth::Credential::anonymous(),
    )
    .await
    .err()
    .unwrap();
    assert!(
        anonymous
            .to_string()
            .starts_with(&format!("401 from {} without a credential", registry.host))
    );
}

#[tokio::test]
async fn signatures_keyless_by_identity_and_issuer() {
    let registry = TestRegistry::start(Auth::Htpasswd).unwrap();
    let good = registry
        .push_wasm("plugins/good:1", &tiny_component("good"))
        .unwrap();
    let other = registry
        .push_wasm("plugins/other:1", &tiny_component("other"))
        .unwrap();
    let attest = registry
        .push_wasm("plugins/attest:1", &tiny_component("attest"))
        .unwrap();
    let unsigned_d = registry
        .push_wasm("plugins/unsigned:1", &tiny_component("unsigned"))
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = registry
        .sign_keyless(
            work.path(),
            &[
                ("signer@example.test", "plugins/good", &good, None),
                ("mallory@example.test", "plugins/other", &other, None),
                (
                    "signer@example.test",
                    "plugins/attest",
                    &attest,
                    Some("https://spdx.dev/Document"),
                ),
            ],
        )
        .unwrap();
    let files = tempfile::tempdir().unwrap();
    let config = files.path().join("config.json");
    std::fs::write(&config, registry.docker_config("tester", "s3cret-pw")).unwrap();
    let root = TrustRoot::file(&root).unwrap();
    let options = PullOptions {
        policy: Policy::Keyless {
            identity: "signer@example.test".into(),
            issuer: "https://issuer.example.test".into(),
        },
        root: root.clone(),
        ..unsigned(&registry)
    };
    let resolve_as = |repo: &str| {
        let r = reference(&registry, repo);
        let credential = toolhost_registry::auth::from_file(&config, &registry.host)
            .unwrap()
            .unwrap();
        let options = options.clone();
        async move {
            let remote = toolhost_registry::Remote::connect_with(
                &r,
                &options.insecure,
                toolhost_registry::Access::Pull,
                credential,
            )
            .await?;
            toolhost_registry::resolve_with(remote, &r, &options).await
        }
    };
    let ok = resolve_as("plugins/good:1").await.unwrap();
    assert_eq!(ok.signature.kind, "keyless");
    assert_eq!(
        ok.signature.identity.as_deref(),
        Some("signer@example.test")
    );
    assert_eq!(
        ok.signature.issuer.as_deref(),
        Some("https://issuer.example.test")
    );
    assert_eq!(ok.signature.trusted_root, Some(root.describe()));
    assert!(ok.signature.bundle.is_some());
    // Another identity: refused naming the expected one and the one found.
    let e = resolve_as("plugins/other:1").await.err().unwrap();
    let text = e.to_string();
    assert!(e.is_refusal());
    assert!(
        text.starts_with(&format!(
            "refused oci://{}/plugins/other:1@{other} ({other}): not signed by the expected signer\n  \
             expected: keyless signature by identity signer@example.test, issuer \
             https://issuer.example.test (trusted root {})\n  found 1 Sigstore bundle:\n",
            registry.host,
            root.describe()
        )),
        "{text}"
    );
    assert!(
        text.contains("identity mismatch: expected signer@example.test, got mallory@example.test"),
        "{text}"
    );
    // An attestation by the right identity is not a signature.
    let text = resolve_as("plugins/attest:1")
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        text.contains(
            "an attestation of predicate type https://spdx.dev/Document, not a signature"
        ),
        "{text}"
    );
    // Unsigned.
    let text = resolve_as("plugins/unsigned:1")
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        text.contains("): unsigned\n  expected: keyless signature by identity signer@example.test")
            && text.contains(&format!(
                "found no Sigstore bundle referring to {unsigned_d}\n  (install it anyway with --allow-unsigned)"
            )),
        "{text}"
    );
    // The public root does not trust the mock's log.
    let public = PullOptions {
        root: TrustRoot::Public,
        ..options.clone()
    };
    let r = reference(&registry, "plugins/good:1");
    let credential = toolhost_registry::auth::from_file(&config, &registry.host)
        .unwrap()
        .unwrap();
    let remote = toolhost_registry::Remote::connect_with(
        &r,
        &public.insecure,
        toolhost_registry::Access::Pull,
        credential,
    )
    .await
    .unwrap();
    let text = toolhost_registry::resolve_with(remote, &r, &public)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(text.contains("not signed by the expected signer"), "{text}");
}

#[tokio::test]
async fn signatures_by_key() {
    let registry = TestRegistry::start(Auth::Htpasswd).unwrap();
    let digest = registry
        .push_wasm("plugins/keyed:1", &tiny_component("keyed"))
        .unwrap();
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
    let config = work.path().join("config.json");
    std::fs::write(&config, registry.docker_config("tester", "s3cret-pw")).unwrap();
    let r = reference(&registry, "plugins/keyed:1");
    for (key, ok) in [(&public_a, true), (&public_b, false)] {
        let options = PullOptions {
            policy: Policy::key_file(key).unwrap(),
            root: TrustRoot::file(&root).unwrap(),
            ..unsigned(&registry)
        };
        let credential = toolhost_registry::auth::from_file(&config, &registry.host)
            .unwrap()
            .unwrap();
        let remote = toolhost_registry::Remote::connect_with(
            &r,
            &options.insecure,
            toolhost_registry::Access::Pull,
            credential,
        )
        .await
        .unwrap();
        let got = toolhost_registry::resolve_with(remote, &r, &options).await;
        if ok {
            let v = got.unwrap().signature;
            assert_eq!(v.kind, "key");
            assert!(v.key_sha256.unwrap().starts_with("sha256:"));
        } else {
            let text = got.err().unwrap().to_string();
            assert!(text.contains("invalid signature"), "{text}");
            assert!(
                text.contains(&format!("signature by the key in {}", key.display())),
                "{text}"
            );
        }
    }
}

#[tokio::test]
async fn published_artifacts_read_back_with_oras() {
    let registry = TestRegistry::start(Auth::Anonymous).unwrap();
    let component = tiny_component("published");
    let target = reference(&registry, "plugins/pub:1");
    let remote = toolhost_registry::Remote::connect_with(
        &target,
        &unsigned(&registry).insecure,
        toolhost_registry::Access::Push,
        toolhost_registry::auth::Credential::anonymous(),
    )
    .await
    .unwrap();
    let publication = toolhost_registry::publish::Publication {
        component: component.clone(),
        file_name: "pub.wasm".into(),
        exports: vec!["toolhost:plugin/tool@0.2.0".into()],
        imports: vec![],
        toolhost_manifest: Some("id = \"pub\"\ncontract = \"0.2.0\"\n".into()),
        created: "2026-12-02T00:00:00Z".into(),
    };
    let digest = toolhost_registry::publish::publish(&remote, &target, &publication)
        .await
        .unwrap();
    let out = tempfile::tempdir().unwrap();
    let files = registry.pull("plugins/pub:1", out.path()).unwrap();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].ends_with("pub.wasm"), "{files:?}");
    assert_eq!(std::fs::read(&files[0]).unwrap(), component);
    let resolved = resolve(&target, &unsigned(&registry)).await.unwrap();
    assert_eq!(resolved.artifact.digest, digest);
    assert_eq!(
        resolved.artifact.toolhost_manifest.as_deref(),
        Some("id = \"pub\"\ncontract = \"0.2.0\"\n")
    );
    let config = resolved.config().await.unwrap();
    assert_eq!(config["os"], "wasip2");
    assert_eq!(
        config["layerDigests"][0],
        toolhost_registry::Digest::of(&component).as_str()
    );
}
