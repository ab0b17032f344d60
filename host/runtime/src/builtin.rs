//! The built-in plugins, compiled from `plugins/` by `build.rs` and embedded
//! in the binary so `toolhost` works with no setup.

/// The `bash` tool plugin component (`plugins/bash`).
pub static BASH: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/toolhost_bash.wasm"));

/// The policy plugin component (`plugins/policy`).
pub static POLICY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/toolhost_policy.wasm"));

/// Lowercase hex sha256 of [`BASH`], computed at build time.
pub const BASH_SHA256: &str = include_str!(concat!(env!("OUT_DIR"), "/toolhost_bash.sha256"));

/// Lowercase hex sha256 of [`POLICY`], computed at build time.
pub const POLICY_SHA256: &str = include_str!(concat!(env!("OUT_DIR"), "/toolhost_policy.sha256"));

/// The build-time sha256 of `bytes` when they are one of the embedded plugins
/// (the same slice, by address and length), so start-up does not hash them.
pub fn known_sha256(bytes: &[u8]) -> Option<&'static str> {
    [(BASH, BASH_SHA256), (POLICY, POLICY_SHA256)]
        .into_iter()
        .find(|(b, _)| std::ptr::eq(*b, bytes))
        .map(|(_, digest)| digest)
}

/// Plugin id of the built-in bash plugin.
pub const BASH_ID: &str = "bash";

/// Plugin id of the built-in policy plugin.
pub const POLICY_ID: &str = "policy";

/// The built-in bash plugin's manifest: exec `**` (the policy plugin and
/// approvers decide each command), no files or env, no client grants
/// (elicitation, sampling), default memory, CPU 60 s, wall time 11 minutes (its
/// longest foreground timeout is 10), and no sandbox restriction of its own
/// (`--sandbox`/`--allow-network`/`--allow-unix-sockets` decide).
pub fn bash_manifest() -> crate::manifest::Manifest {
    use crate::manifest::{ExecGrant, Manifest};
    Manifest {
        exec: ExecGrant::Patterns(vec!["**".into()]),
        network: true,
        unix_sockets: true,
        limits: crate::Limits {
            wall: std::time::Duration::from_secs(11 * 60),
            // It drains output events while a command floods: real work
            // that grows with the output, not a runaway loop.
            cpu: std::time::Duration::from_secs(60),
            ..crate::Limits::default()
        },
        ..Manifest::deny_all(BASH_ID)
    }
}

/// The limits the built-in policy plugin runs under: 512 MiB of memory and 10 s
/// of CPU per decision (the defaults otherwise), because it parses commands of up
/// to 1 MiB, whose worst shape (about 150,000 simple commands) takes about 1.4 s
/// and 400 MB natively (`plugins/policy/src/shell.rs`, `MAX_INPUT`).
pub fn policy_limits() -> crate::Limits {
    crate::Limits {
        memory_bytes: 512 << 20,
        cpu: std::time::Duration::from_secs(10),
        ..crate::Limits::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::component::Component;
    use wasmtime::component::types::ComponentItem;
    use wasmtime::{Config, Engine};

    /// The exports and the imported interfaces of a component.
    fn exports_and_imports(bytes: &[u8]) -> (Vec<String>, Vec<String>) {
        let engine = Engine::new(Config::new().wasm_component_model(true)).unwrap();
        let component = Component::new(&engine, bytes).expect("a valid component");
        let ty = component.component_type();
        let exports = ty
            .exports(&engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let imports = ty
            .imports(&engine)
            .filter(|(_, item)| matches!(item.ty, ComponentItem::ComponentInstance(_)))
            .map(|(name, _)| name.to_string())
            .collect();
        (exports, imports)
    }

    #[test]
    fn bash_plugin_targets_the_tool_plugin_world() {
        let (exports, imports) = exports_and_imports(BASH);
        assert_eq!(exports, vec!["toolhost:plugin/tool@0.1.0".to_string()]);
        assert!(
            imports.contains(&"toolhost:plugin/sessions@0.1.0".to_string()),
            "{imports:?}"
        );
        // Nothing outside the world's imports (no sockets, no HTTP).
        for import in &imports {
            assert!(
                import.starts_with("wasi:cli/")
                    || import.starts_with("wasi:io/")
                    || import.starts_with("wasi:clocks/")
                    || import.starts_with("wasi:random/")
                    || import.starts_with("wasi:filesystem/")
                    || import == "toolhost:plugin/sessions@0.1.0",
                "unexpected import {import}"
            );
        }
    }

    #[test]
    fn policy_plugin_targets_the_policy_plugin_world_and_imports_no_authority() {
        let (exports, imports) = exports_and_imports(POLICY);
        assert_eq!(exports, vec!["toolhost:plugin/policy@0.1.0".to_string()]);
        assert!(
            !imports.iter().any(|i| i.starts_with("toolhost:")),
            "{imports:?}"
        );
        assert!(
            !imports.iter().any(|i| i.starts_with("wasi:sockets/")),
            "{imports:?}"
        );
    }

    #[test]
    fn the_bash_manifest_grants_every_command_and_no_client() {
        let m = bash_manifest();
        assert!(m.exec.grants_everything());
        assert!(!m.elicitation && !m.sampling);
        assert!(m.preopens.is_empty() && m.env.is_empty());
        assert_eq!(m.id, BASH_ID);
    }

    #[test]
    fn build_time_digests_match_the_embedded_bytes() {
        let hex = |bytes: &[u8]| -> String {
            use sha2::Digest;
            sha2::Sha256::digest(bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        };
        assert_eq!(BASH_SHA256, hex(BASH));
        assert_eq!(POLICY_SHA256, hex(POLICY));
        assert_eq!(known_sha256(BASH), Some(BASH_SHA256));
        assert_eq!(
            known_sha256(BASH.to_vec().as_slice()),
            None,
            "only the embedded slice"
        );
    }
}
