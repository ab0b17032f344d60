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
    let out = bench().args(["--only", "P9"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown figure `P9`"));
}
