//! One row per figure and the table `toolhost-bench` prints.

use serde::{Deserialize, Serialize};

/// The result of one figure (or one variant of it, e.g. P3 host and P3 guest).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// `P1` … `P7`, with a variant suffix when a figure has two rows (`P3 guest`).
    pub id: String,
    /// What was measured, in a few words.
    pub what: String,
    /// The measured value (median unless said otherwise).
    pub measured: String,
    /// The baseline measured in the same run, interleaved.
    pub baseline: String,
    /// The ratio the goal is stated in (see `ratio_note`), when there is one.
    pub ratio: Option<f64>,
    /// How the ratio is formed, e.g. `toolhost / raw` or `raw / toolhost`.
    pub ratio_note: String,
    /// The goal, as the issue states it.
    pub goal: String,
    /// Whether every part of the goal was met.
    pub met: bool,
    /// Further measured facts (p99, min/max, thread counts, ...).
    pub details: Vec<String>,
}

/// The table: a header, a row per figure, then each row's details.
pub fn table(rows: &[Row]) -> String {
    let headers = ["id", "measured", "baseline", "ratio", "goal", "met"];
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            [
                r.id.clone(),
                r.measured.clone(),
                r.baseline.clone(),
                r.ratio
                    .map(|x| format!("{x:.3} ({})", r.ratio_note))
                    .unwrap_or_else(|| "-".into()),
                r.goal.clone(),
                if r.met { "yes" } else { "NO" }.to_string(),
            ]
        })
        .collect();
    let mut widths = headers.map(|h| h.chars().count());
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cols: &[String]| {
        let mut out = String::from("|");
        for (c, w) in cols.iter().zip(widths) {
            out.push_str(&format!(" {c}{} |", " ".repeat(w - c.chars().count())));
        }
        out.push('\n');
        out
    };
    let mut out = line(&headers.map(String::from));
    out.push('|');
    for w in widths {
        out.push_str(&format!("{}|", "-".repeat(w + 2)));
    }
    out.push('\n');
    for row in &cells {
        out.push_str(&line(row));
    }
    out.push('\n');
    for r in rows {
        out.push_str(&format!("{}: {}\n", r.id, r.what));
        for d in &r.details {
            out.push_str(&format!("    {d}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_a_row_per_figure_starting_with_its_id() {
        let row = |id: &str, met| Row {
            id: id.into(),
            what: "thing".into(),
            measured: "1 µs".into(),
            baseline: "2 µs".into(),
            ratio: Some(0.5),
            ratio_note: "toolhost / raw".into(),
            goal: "≤ 10 µs".into(),
            met,
            details: vec!["p99 3 µs".into()],
        };
        let t = table(&[row("P1", true), row("P2", false)]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("| id "));
        assert!(lines[2].starts_with("| P1 "), "{t}");
        assert!(lines[2].contains("| yes |"), "{t}");
        assert!(lines[3].starts_with("| P2 "), "{t}");
        assert!(lines[3].contains("| NO  |"), "{t}");
        assert!(lines[3].contains("0.500 (toolhost / raw)"), "{t}");
        assert!(t.contains("P1: thing\n    p99 3 µs\n"), "{t}");
    }
}
