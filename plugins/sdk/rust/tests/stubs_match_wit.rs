//! The hand-written Python stubs (`plugins/sdk/python/toolhost_sdk.pyi`) and
//! TypeScript declarations (`plugins/sdk/js/toolhost.d.ts`) must describe the
//! contract the plugin is built against: every type, record field, variant
//! case, enum case, resource method and function of the `tool` and `sessions`
//! interfaces of `wit/v0.1.0`, each in its language's case convention
//! (componentize-py: `PascalCase` classes, `snake_case` fields, `Variant_Case`
//! classes, `UPPER_SNAKE` enum members; jco: `camelCase` fields, `'kebab-case'`
//! tags and enum strings, `bigint` for u64, `?:` for options). jco 1.35 and
//! componentize-py cannot generate these stubs from a WIT folder for an author,
//! so they are shipped and checked here.

use std::path::{Path, PathBuf};

use wit_parser::{FunctionKind, Resolve, Type, TypeDefKind};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn pascal(kebab: &str) -> String {
    kebab
        .split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn camel(kebab: &str) -> String {
    let p = pascal(kebab);
    let mut c = p.chars();
    c.next()
        .map(|f| f.to_ascii_lowercase().to_string() + c.as_str())
        .unwrap_or_default()
}

fn snake(kebab: &str) -> String {
    kebab.replace('-', "_")
}

/// The text of the block that starts at the line containing `head` and ends
/// before the next line that starts at column 0 with something other than a
/// closing `}` (Python classes) or at the first line that is `}` / ends with
/// `;` at column 0 (TypeScript).
fn block<'a>(text: &'a str, head: &str, file: &str) -> &'a str {
    let start = text
        .find(head)
        .unwrap_or_else(|| panic!("{file}: `{head}` is missing"));
    let rest = &text[start..];
    let mut end = rest.len();
    let mut offset = 0;
    for (i, line) in rest.split_inclusive('\n').enumerate() {
        if i > 0 {
            let top_level =
                !line.starts_with(' ') && !line.starts_with('\t') && !line.starts_with('|');
            if line.starts_with('}') {
                end = offset + line.len();
                break;
            }
            if top_level && !line.trim().is_empty() {
                end = offset;
                break;
            }
        }
        offset += line.len();
    }
    &rest[..end]
}

fn expect(block: &str, needle: &str, what: &str, file: &str) {
    assert!(
        block.contains(needle),
        "{file}: {what}: `{needle}` is missing in:\n{block}"
    );
}

#[test]
fn python_stubs_and_typescript_declarations_match_the_wit() {
    let root = root();
    let mut resolve = Resolve::new();
    let (pkg, _) = resolve
        .push_dir(root.join("wit/v0.1.0"))
        .expect("parse wit/v0.1.0");
    let pyi_file = "plugins/sdk/python/toolhost_sdk.pyi";
    let dts_file = "plugins/sdk/js/toolhost.d.ts";
    let pyi = std::fs::read_to_string(root.join(pyi_file)).unwrap();
    let dts = std::fs::read_to_string(root.join(dts_file)).unwrap();

    let mut checked = 0;
    for name in ["tool", "sessions"] {
        let iface = &resolve.interfaces[resolve.packages[pkg].interfaces[name]];
        for (type_name, &id) in &iface.types {
            let def = &resolve.types[id];
            let p = pascal(type_name);
            match &def.kind {
                TypeDefKind::Record(record) => {
                    let py = block(&pyi, &format!("class {p}:"), pyi_file);
                    let ts = block(&dts, &format!("interface {p} {{"), dts_file);
                    for field in &record.fields {
                        let what = format!("field {}.{}", type_name, field.name);
                        let (opt, u64) = match field.ty {
                            Type::U64 => (false, true),
                            Type::Id(t) => match resolve.types[t].kind {
                                TypeDefKind::Option(Type::U64) => (true, true),
                                TypeDefKind::Option(_) => (true, false),
                                _ => (false, false),
                            },
                            _ => (false, false),
                        };
                        let py_ty = if opt { "Optional[" } else { "" };
                        expect(
                            py,
                            &format!("    {}: {py_ty}", snake(&field.name)),
                            &what,
                            pyi_file,
                        );
                        let ts_sep = if opt { "?: " } else { ": " };
                        let ts_ty = if u64 { "bigint" } else { "" };
                        expect(
                            ts,
                            &format!("  {}{ts_sep}{ts_ty}", camel(&field.name)),
                            &what,
                            dts_file,
                        );
                        checked += 1;
                    }
                }
                TypeDefKind::Variant(variant) => {
                    let ts = block(&dts, &format!("type {p} ="), dts_file);
                    for case in &variant.cases {
                        let what = format!("case {}::{}", type_name, case.name);
                        let class = format!("class {p}_{}", pascal(&case.name));
                        if case.ty.is_some() {
                            let py = block(&pyi, &format!("{class}:"), pyi_file);
                            expect(py, "    value: ", &what, pyi_file);
                            expect(
                                ts,
                                &format!("{{ tag: '{}'; val: ", case.name),
                                &what,
                                dts_file,
                            );
                        } else {
                            expect(&pyi, &format!("{class}: ..."), &what, pyi_file);
                            expect(ts, &format!("{{ tag: '{}' }}", case.name), &what, dts_file);
                        }
                        checked += 1;
                    }
                    expect(&pyi, &format!("\n{p} = Union["), type_name, pyi_file);
                }
                TypeDefKind::Enum(e) => {
                    let py = block(&pyi, &format!("class {p}(Enum):"), pyi_file);
                    let ts = block(&dts, &format!("type {p} ="), dts_file);
                    for case in &e.cases {
                        let what = format!("enum case {}::{}", type_name, case.name);
                        expect(
                            py,
                            &format!("    {} = ", snake(&case.name).to_uppercase()),
                            &what,
                            pyi_file,
                        );
                        expect(ts, &format!("'{}'", case.name), &what, dts_file);
                        checked += 1;
                    }
                }
                TypeDefKind::Resource => {
                    block(&pyi, &format!("class {p}:"), pyi_file);
                    block(&dts, &format!("class {p} {{"), dts_file);
                }
                // A type `use`d from another interface (`pollable`).
                TypeDefKind::Type(Type::Id(_)) => {}
                TypeDefKind::Type(_) => {
                    // An alias (`session-id`): Python uses the underlying type.
                    expect(&dts, &format!("type {p} = "), type_name, dts_file);
                }
                other => panic!("{type_name}: no stub rule for {other:?}; extend this test"),
            }
        }
        for func in iface.functions.values() {
            let item = func.item_name();
            let (py, ts) = match &func.kind {
                FunctionKind::Method(t) => {
                    let r = pascal(resolve.types[*t].name.as_deref().unwrap());
                    (
                        block(&pyi, &format!("class {r}:"), pyi_file),
                        block(&dts, &format!("class {r} {{"), dts_file),
                    )
                }
                FunctionKind::Freestanding if name == "tool" => (
                    block(&pyi, "class _ToolBase(Protocol):", pyi_file),
                    block(&dts, "interface Tool {", dts_file),
                ),
                FunctionKind::Freestanding => (
                    block(&pyi, "class _Sessions(Protocol):", pyi_file),
                    block(&dts, "namespace sessions {", dts_file),
                ),
                other => panic!(
                    "{}: no stub rule for {other:?}; extend this test",
                    func.name
                ),
            };
            let what = format!("function {name}.{}", func.name);
            expect(py, &format!("def {}(", snake(item)), &what, pyi_file);
            expect(ts, &format!("{}(", camel(item)), &what, dts_file);
            checked += 1;
        }
    }
    assert!(checked > 80, "only {checked} items checked");
}

#[test]
fn the_case_conversions() {
    assert_eq!(pascal("session-error"), "SessionError");
    assert_eq!(camel("tool-call-id"), "toolCallId");
    assert_eq!(snake("read-new-output"), "read_new_output");
}
