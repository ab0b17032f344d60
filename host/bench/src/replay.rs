//! P7: replay: paging through 100,000 recorded events from cursor 0 with
//! [`HostSessionLog::replay`] (file-backed log, as `toolhost serve` keeps), against reading
//! the same `events.jsonl` and splitting its lines without parsing them (the I/O
//! floor).

use std::io::BufRead;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use toolhost_runtime::{HostEventKind, HostSessionLog, MAX_REPLAY_EVENTS};

use crate::fixture::Fixture;
use crate::report::Row;
use crate::stats::{median, rate};

/// Appends `n` events shaped like real sessions: per session `process_started`, eight
/// `process_output` chunks of 60 bytes and `process_exited`.
pub fn fill(log: &HostSessionLog, n: usize) {
    let mut appended = 0;
    let mut session = 0u64;
    while appended < n {
        session += 1;
        let session_id = format!("bg_{session:012x}");
        let tool_call_id = Some(format!("tc_{session:012}"));
        let mut events = vec![HostEventKind::ProcessStarted {
            actor: None,
            session_id: session_id.clone(),
            tool_call_id: tool_call_id.clone(),
            command: "cargo test --workspace".into(),
            pid: 4242,
            start_time: None,
            sandbox: "workspace-write, network blocked".into(),
        }];
        for k in 0..8u64 {
            events.push(HostEventKind::ProcessOutput {
                session_id: session_id.clone(),
                tool_call_id: tool_call_id.clone(),
                stream: "stdout".into(),
                offset: k * 60,
                len: 60,
                text: "test sessions::output::keeps_the_tail_bounded ... ok\n      ".into(),
            });
        }
        events.push(HostEventKind::ProcessExited {
            session_id,
            tool_call_id,
            status: "exited".into(),
            code: Some(0),
            signal: None,
            summary: "exited with code 0".into(),
        });
        for e in events.into_iter().take(n - appended) {
            log.append(e);
            appended += 1;
        }
    }
}

/// Replays everything after `cursor` page by page; returns the number of events.
pub fn replay_all(log: &HostSessionLog, mut cursor: u64) -> usize {
    let mut count = 0;
    loop {
        let page = log.replay(cursor, MAX_REPLAY_EVENTS);
        count += page.events.len();
        if let Some(last) = page.events.last() {
            cursor = last.seq;
        }
        if page.history_complete || page.events.is_empty() {
            return count;
        }
    }
}

/// Reads the log file and splits it into lines; returns the number of lines.
pub fn read_lines(path: &std::path::Path) -> Result<usize> {
    let file = std::fs::File::open(path)?;
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, file);
    let mut line = Vec::new();
    let mut count = 0;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(count);
        }
        count += 1;
    }
}

/// A file-backed log holding `n` events, in `fixture`'s state dir.
pub fn log_with(fixture: &Fixture, n: usize) -> Result<HostSessionLog> {
    let log = HostSessionLog::open(&fixture.state, Some("hs_bench"))?;
    fill(&log, n);
    Ok(log)
}

/// P7's goal: at least 3M events/s replayed from the file.
const GOAL: f64 = 3e6;

/// Runs P7 over `n` events, `reps` replays of each kind, interleaved.
pub fn run(n: usize, reps: usize) -> Result<Vec<Row>> {
    let fixture = Fixture::new()?;
    let log = log_with(&fixture, n)?;
    let path = log.path().context("no file")?.to_path_buf();
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let t = Instant::now();
        let count = replay_all(&log, 0);
        ours.push(count as f64 / t.elapsed().as_secs_f64());
        ensure!(count == n, "replayed {count} of {n} events");
        let t = Instant::now();
        let lines = read_lines(&path)?;
        raw.push(lines as f64 / t.elapsed().as_secs_f64());
        ensure!(lines == n, "the file has {lines} lines, not {n}");
    }
    let ours_rate = median(ours.clone());
    let raw_rate = median(raw.clone());
    let r = ours_rate / raw_rate;
    Ok(vec![Row {
        id: "P7".into(),
        what: format!(
            "replay: {n} events from cursor 0 via HostSessionLog::replay, pages of \
             {MAX_REPLAY_EVENTS} (file-backed log), vs reading events.jsonl and splitting \
             lines unparsed; median of {reps}"
        ),
        measured: rate(ours_rate),
        baseline: rate(raw_rate),
        ratio: Some(r),
        ratio_note: "toolhost / read-lines".into(),
        goal: format!("≥ {}", rate(GOAL)),
        met: ours_rate >= GOAL,
        details: vec![
            format!(
                "toolhost: {}",
                ours.iter().map(|&v| rate(v)).collect::<Vec<_>>().join(", ")
            ),
            format!(
                "raw:      {}",
                raw.iter().map(|&v| rate(v)).collect::<Vec<_>>().join(", ")
            ),
        ],
    }])
}
