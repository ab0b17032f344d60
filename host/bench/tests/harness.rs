//! The harness itself works: it runs a figure in a child process, prints the table
//! with the figure's row, and refuses unknown figures. No timing is asserted.

use std::process::Command;

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolhost-bench"))
}

#[test]
fn prints_a_row_per_figure_with_its_baseline() {
    let out = bench().args(["--quick", "--only", "P7"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("| id ")).unwrap();
    assert!(lines[header].contains("| baseline "), "{stdout}");
    let row = lines[header + 2];
    assert!(row.starts_with("| P7 "), "{stdout}");
    assert!(!row.contains("error"), "{stdout}");
    // measured, baseline and ratio are filled in (the ratio names its terms).
    assert!(row.contains("/s"), "{stdout}");
    assert!(row.contains("(toolhost / read-lines)"), "{stdout}");
    assert!(stdout.contains("P7: replay: 100000 events"), "{stdout}");
}

#[test]
fn unknown_figures_are_refused() {
    let out = bench().args(["--only", "P99"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown figure `P99`"));
}

/// P8's and P9's baseline server answers `tools/list` and `greet` as the Rust
/// example plugin does.
#[test]
fn the_baseline_mcp_server_greets_like_the_example() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::TokioChildProcess;

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolhost-bench-mcp"));
        let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
        let tools = client.list_all_tools().await.unwrap();
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].name, "greet");
        let mut params = CallToolRequestParams::new("greet");
        params.arguments = serde_json::json!({ "name": "Ada" }).as_object().cloned();
        let result = client.call_tool(params).await.unwrap();
        let content = serde_json::to_value(&result.content).unwrap();
        assert_eq!(content[0]["text"], "Hello, Ada!");
        assert_eq!(
            result.structured_content,
            Some(serde_json::json!({ "greeting": "Hello, Ada!" }))
        );
        client.cancel().await.unwrap();
    });
}
