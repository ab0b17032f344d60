//! Criterion micro-benchmarks for P1 (plugin call), P3 (wake-up) and P7 (replay);
//! `cargo bench -p toolhost-bench`. The side-by-side table with baselines is
//! `cargo run --release -p toolhost-bench`.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use toolhost_bench::fixture::Fixture;
use toolhost_bench::{plugin_call, replay, wakeup};

fn p1_plugin_call(c: &mut Criterion) {
    let rt = toolhost_runtime::tokio_runtime().expect("runtime");
    let fixture = Fixture::new().expect("fixture");
    let (_host, plugin, bare) = rt
        .block_on(plugin_call::setup(&fixture))
        .expect("plugin setup");
    let list_shells = plugin
        .tools()
        .iter()
        .find(|t| t.name == "list_shells")
        .expect("list_shells")
        .clone();
    let mut g = c.benchmark_group("P1");
    // Back to back: each call's background refill overlaps the next call
    // (`toolhost-bench --only P1` also measures calls spaced apart).
    g.bench_function("toolhost list_shells (fresh instance, made ahead)", |b| {
        b.iter(|| {
            rt.block_on(plugin.call(&list_shells, "p1", "{}".to_string(), None, None))
                .expect("call")
                .expect("list_shells")
        })
    });
    g.bench_function("bare wasmtime list_shells (fresh instance)", |b| {
        b.iter(|| rt.block_on(bare.call("list_shells", "{}")).expect("call"))
    });
    g.bench_function("toolhost describe (fresh instance)", |b| {
        b.iter(|| rt.block_on(plugin.describe()).expect("describe"))
    });
    g.finish();
}

fn p3_wakeup(c: &mut Criterion) {
    let rt = toolhost_runtime::tokio_runtime().expect("runtime");
    let fixture = Fixture::new().expect("fixture");
    let sessions = rt
        .block_on(async { fixture.sessions(64) })
        .expect("sessions");
    let mut g = c.benchmark_group("P3");
    g.sample_size(30);
    // Each iteration measures kill → woken; spawning is outside the timed part.
    g.bench_function("host subscription wake-up", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| rt.block_on(wakeup::host_once(&sessions)).expect("sample"))
                .sum()
        })
    });
    g.bench_function("tokio Child::wait wake-up", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| rt.block_on(wakeup::raw_once()).expect("sample"))
                .sum()
        })
    });
    g.finish();
}

fn p7_replay(c: &mut Criterion) {
    let fixture = Fixture::new().expect("fixture");
    let log = replay::log_with(&fixture, 100_000).expect("log");
    let path = log.path().expect("file").to_path_buf();
    let mut g = c.benchmark_group("P7");
    g.sample_size(10);
    g.throughput(criterion::Throughput::Elements(100_000));
    g.bench_function("replay 100k events from cursor 0", |b| {
        b.iter_batched(
            || (),
            |()| replay::replay_all(&log, 0),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("read + split 100k lines", |b| {
        b.iter(|| replay::read_lines(&path).expect("read"))
    });
    g.finish();
}

criterion_group!(benches, p1_plugin_call, p3_wakeup, p7_replay);
criterion_main!(benches);
