//! The embedded plugins are components that target the contract's worlds.

use toolhost::builtin;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;
use wasmtime::{Config, Engine};

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
    let (exports, imports) = exports_and_imports(builtin::BASH);
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
    let (exports, imports) = exports_and_imports(builtin::POLICY);
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
