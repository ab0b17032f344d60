//! Load: many concurrent tool calls over one `toolhost serve` (foreground
//! commands, background starts, output reads, kills and time-outs issued at
//! once) lose no event, fail only where expected, and leave no process. The
//! mix and its checks are `toolhost_test_support::load`; its full size (200
//! calls) is figure L1 of the benchmark harness (`host/bench/src/load.rs`),
//! and this is the same run at 40 calls.

use toolhost_test_support::StdioClient;
use toolhost_test_support::load::{MAX_SESSIONS, Mix, run};

use crate::support::{allow_all_policy, dirs, serve};

/// 40 calls: every result as its call must answer (exact text and `isError`;
/// the time-outs are the only errors), every started session's first line
/// read, the host-session log complete (seqs 1..n without a gap, each call
/// started and then finished once, each process started and then exited
/// once, with the exit status the results call for), and every process the
/// run started reaped by the host while it still serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_concurrent_mixed_calls_lose_nothing_and_leave_no_process() {
    let mix = Mix {
        pre: 8,
        kills: 4,
        reads: 8,
        timeouts: 2,
        starts: 4,
        foreground: 18,
        lists: 4,
    };
    assert_eq!(mix.calls(), 40);
    assert!(mix.sessions() <= MAX_SESSIONS);
    let (ws, state) = dirs();
    let mut cmd = serve(ws.path(), state.path());
    cmd.arg("--policy").arg(allow_all_policy(state.path()));
    let client = StdioClient::spawn(cmd).unwrap();
    let init = client.initialize("2025-11-25").await.unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");

    let report = run(client, state.path(), &mix).await.unwrap();
    assert_eq!(report.burst, 40);
    assert!(report.unexpected.is_empty(), "{:#?}", report.unexpected);
    assert_eq!(
        report.expected_errors, mix.timeouts,
        "only the time-outs fail"
    );
    assert_eq!(
        (report.lost, &report.lost_examples),
        (0, &Vec::new()),
        "the log lost or misplaced events"
    );
    assert_eq!(report.log.calls, report.calls_made);
    assert_eq!(report.log.sessions, mix.sessions());
    assert_eq!(report.processes, mix.sessions());
    assert_eq!(report.log.statuses, mix.statuses());
    assert_eq!(report.leftover, 0, "processes not reaped");
    assert!(report.met(&mix), "{report:#?}");
}
