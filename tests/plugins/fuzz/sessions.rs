// The part of the fuzz plugins both contract versions share: a seeded
// generator of edge values and random sequences of every function and
// resource method of `toolhost:plugin/sessions@0.1.0`. Each crate includes
// this file (`include!`) after naming its bindings' `sessions` module `s`,
// the wasi `poll` and `monotonic_clock` modules, and defining `Extra`, the
// contract's own calls.

/// splitmix64: small, fast, and the same sequence for the same seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// An edge `u64`: 0, 1, the maxima of the narrower types, `u64::MAX`,
    /// or a random value.
    pub fn u64(&mut self) -> u64 {
        match self.below(8) {
            0 => 0,
            1 => 1,
            2 => u64::MAX,
            3 => u64::MAX - 1,
            4 => u32::MAX as u64,
            5 => i64::MAX as u64,
            6 => self.next() % 100_000,
            _ => self.next(),
        }
    }

    pub fn u32(&mut self) -> u32 {
        match self.below(6) {
            0 => 0,
            1 => 1,
            2 => u32::MAX,
            3 => 1 << 20,
            4 => (1 << 20) + 1,
            _ => self.next() as u32,
        }
    }

    /// Random bytes: empty, a few, NULs, invalid UTF-8, or up to `max` bytes.
    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        match self.below(6) {
            0 => Vec::new(),
            1 => vec![0; 1 + self.below(16)],
            2 => vec![0xff, 0xfe, 0xc0, 0x80, 0xed, 0xa0, 0x80],
            3 => {
                let n = self.below(max.max(1));
                vec![b'x'; n]
            }
            _ => {
                let n = self.below(256);
                (0..n).map(|_| self.next() as u8).collect()
            }
        }
    }

    /// A random string: empty, NULs, control characters, bidi controls,
    /// non-ASCII, very long, or printable junk.
    pub fn string(&mut self) -> String {
        match self.below(9) {
            0 => String::new(),
            1 => "\0".repeat(1 + self.below(8)),
            2 => "a\0b".into(),
            3 => "\u{1b}[31m\u{202e}evil\u{2066}\r\n\t".into(),
            4 => "\u{fffd}\u{10ffff}caf\u{e9}\u{1f600}".into(),
            5 => "x".repeat(1 + self.below(300_000)),
            6 => "../".repeat(1 + self.below(100)),
            7 => {
                let n = self.below(64);
                (0..n)
                    .map(|_| char::from_u32(self.next() as u32 % 0x11_0000).unwrap_or('?'))
                    .collect()
            }
            _ => {
                let n = self.below(32);
                (0..n)
                    .map(|_| (b' ' + (self.next() % 95) as u8) as char)
                    .collect()
            }
        }
    }
}

/// Commands that end by themselves within a few seconds, or that leave
/// processes behind for the host to end (background `sleep 30`s, `setsid`).
const COMMANDS: &[&str] = &[
    "true",
    "false",
    "exit 3",
    "echo hello",
    "echo err >&2",
    "printf 'a\\000b\\377\\376'",
    "cat",
    "cat >/dev/null",
    "head -c 100",
    "sleep 0.05",
    "sleep 2",
    "sleep 30",
    "yes | head -c 300000",
    "head -c 200000 /dev/urandom",
    "for i in 1 2 3 4 5; do printf .; done",
    "kill -9 $$",
    "kill -STOP $$",
    "sleep 30 &",
    "setsid sleep 30 &",
    "(sleep 30 &) ; echo left",
    "exec 1>&- 2>&-; sleep 0.2",
    "ulimit -n 8; cat /dev/zero | head -c 10",
    "touch fuzz-file; ls -la",
];

/// What the generator knows of the sessions it started.
pub struct World {
    pub rng: Rng,
    pub ids: Vec<String>,
    pub subs: Vec<Option<s::Subscription>>,
    pub pollables: Vec<(usize, wasi::io::poll::Pollable)>,
    pub tool_call_id: String,
    pub calls: usize,
    pub errors: usize,
    /// What the host answered that the contract rules out.
    pub violations: Vec<String>,
}

impl World {
    pub fn new(seed: u64, tool_call_id: String) -> World {
        World {
            rng: Rng::new(seed),
            ids: Vec::new(),
            subs: Vec::new(),
            pollables: Vec::new(),
            tool_call_id,
            calls: 0,
            errors: 0,
            violations: Vec::new(),
        }
    }

    /// A session id: one it started, a garbage one, or another form.
    fn id(&mut self) -> String {
        if !self.ids.is_empty() && self.rng.below(4) != 0 {
            return self.rng.pick(&self.ids).clone();
        }
        match self.rng.below(5) {
            0 => "bg_000000000000".into(),
            1 => "bg_ffffffffffff".into(),
            2 => "tc_1".into(),
            _ => self.rng.string(),
        }
    }

    pub fn violation(&mut self, what: String) {
        if self.violations.len() < 20 {
            self.violations.push(what);
        }
    }

    fn count<T, E>(&mut self, r: &Result<T, E>) {
        self.calls += 1;
        if r.is_err() {
            self.errors += 1;
        }
    }

    fn command(&mut self) -> String {
        match self.rng.below(10) {
            0 => self.rng.string(),
            1 => format!("echo '{}'", self.rng.string().replace('\'', "")),
            2 => format!("echo {}", "y".repeat(200_000)),
            _ => self.rng.pick(COMMANDS).to_string(),
        }
    }

    fn request(&mut self) -> s::StartRequest {
        // Half the starts are requests the host accepts, with one edge at most
        // in their stdin and timeout, so sessions really run.
        if self.rng.chance(2) {
            let stdin = match self.rng.below(3) {
                0 => s::StdinMode::Open,
                1 => s::StdinMode::Bytes(self.rng.bytes(1 << 20)),
                _ => s::StdinMode::Closed,
            };
            let timeout_ms = match self.rng.below(4) {
                0 => None,
                1 => Some(u64::MAX),
                2 => Some(u64::MAX / 1_000_000),
                _ => Some(1 + self.rng.below(5000) as u64),
            };
            let tool_call_id = self.rng.chance(2).then(|| self.tool_call_id.clone());
            return s::StartRequest {
                command: self.rng.pick(COMMANDS).to_string(),
                cwd: None,
                env: Vec::new(),
                stdin,
                timeout_ms,
                shell: None,
                tool_call_id,
            };
        }
        let cwd = match self.rng.below(8) {
            0 => Some(".".into()),
            1 => Some("/".into()),
            2 => Some("..".into()),
            3 => Some("/proc/self".into()),
            4 => Some(self.rng.string()),
            _ => None,
        };
        let mut env = Vec::new();
        for _ in 0..self.rng.below(4) {
            let name = match self.rng.below(6) {
                0 => "LANG".into(),
                1 => "PATH".into(),
                2 => "A=B".into(),
                3 => "LD_PRELOAD".into(),
                _ => self.rng.string(),
            };
            env.push((name, self.rng.string()));
        }
        if self.rng.chance(20) {
            env.extend((0..5000).map(|i| (format!("V{i}"), "v".into())));
        }
        let stdin = match self.rng.below(4) {
            0 => s::StdinMode::Bytes(self.rng.bytes(2 << 20)),
            1 => s::StdinMode::Open,
            _ => s::StdinMode::Closed,
        };
        let timeout_ms = match self.rng.below(5) {
            0 => None,
            1 => Some(0),
            2 => Some(u64::MAX),
            3 => Some(1 + self.rng.below(3000) as u64),
            _ => Some(self.rng.u64()),
        };
        let shell = match self.rng.below(9) {
            0 => Some("/bin/sh".into()),
            1 => Some("/bin/bash".into()),
            2 => Some("sh".into()),
            3 => Some("/nonexistent".into()),
            4 => Some("/etc/passwd".into()),
            5 => Some("/".into()),
            6 => Some(self.rng.string()),
            _ => None,
        };
        let tool_call_id = match self.rng.below(4) {
            0 => None,
            1 => Some(self.rng.string()),
            _ => Some(self.tool_call_id.clone()),
        };
        s::StartRequest {
            command: self.command(),
            cwd,
            env,
            stdin,
            timeout_ms,
            shell,
            tool_call_id,
        }
    }

    /// One random call of `sessions` (or of a subscription).
    pub fn step(&mut self) {
        match self.rng.below(16) {
            0 | 1 => {
                let request = self.request();
                let r = s::start(&request);
                self.count(&r);
                if let Ok(id) = r {
                    self.ids.push(id);
                }
            }
            2 => {
                let id = self.id();
                let r = s::check(&id);
                self.count(&r);
            }
            3 => {
                let id = self.id();
                let from = self.rng.u64();
                let r = s::subscribe(&id, from);
                self.count(&r);
                if let Ok(sub) = r {
                    self.subs.push(Some(sub));
                }
            }
            4 => {
                if let Some(i) = self.live_sub() {
                    let p = self.subs[i].as_ref().unwrap().subscribe();
                    self.calls += 1;
                    self.pollables.push((i, p));
                }
            }
            5 => {
                if let Some(i) = self.live_sub() {
                    let events = self.subs[i].as_ref().unwrap().next();
                    self.calls += 1;
                    if events.len() > 256 {
                        self.violation(format!("{} events from one next", events.len()));
                    }
                    // Seqs rise by one; an `omitted` event stands for its range.
                    let rising = events.windows(2).all(|w| {
                        let after = match &w[0].kind {
                            s::EventKind::Omitted(range) => range.last_seq,
                            _ => w[0].seq,
                        };
                        w[1].seq == after + 1
                    });
                    if !rising {
                        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
                        self.violation(format!("next returned seqs {seqs:?}"));
                    }
                }
            }
            6 => {
                // Wait on some pollables and a short timer: never longer.
                if !self.pollables.is_empty() {
                    let timer = wasi::clocks::monotonic_clock::subscribe_duration(
                        self.rng.below(30_000_000) as u64,
                    );
                    let mut list: Vec<&wasi::io::poll::Pollable> =
                        self.pollables.iter().map(|(_, p)| p).collect();
                    list.push(&timer);
                    let ready = wasi::io::poll::poll(&list);
                    self.calls += 1;
                    if ready.is_empty() || ready.iter().any(|&i| i as usize >= list.len()) {
                        self.violation(format!("poll of {} answered {ready:?}", list.len()));
                    }
                }
            }
            7 => {
                // Drop a subscription, its pollables first (WASI: children first).
                if let Some(i) = self.live_sub() {
                    self.pollables.retain(|(owner, _)| *owner != i);
                    self.subs[i] = None;
                }
            }
            8 => {
                let id = self.id();
                let reason = self.rng.string();
                let r = s::detach(&id, &reason);
                self.count(&r);
            }
            9 => {
                let id = self.id();
                let data = self.rng.bytes(1 << 20);
                let r = s::write_stdin(&id, &data);
                self.count(&r);
            }
            10 => {
                let id = self.id();
                let r = s::close_stdin(&id);
                self.count(&r);
            }
            11 => {
                let id = self.id();
                let signal = match self.rng.below(10) {
                    0 => None,
                    1 => Some("SIGTERM".to_string()),
                    2 => Some("SIGKILL".into()),
                    3 => Some("SIGSTOP".into()),
                    4 => Some("SIGCONT".into()),
                    5 => Some("SIGINT".into()),
                    6 => Some("9".into()),
                    7 => Some("SIGKILL\0".into()),
                    _ => Some(self.rng.string()),
                };
                let r = s::kill(&id, signal.as_deref());
                self.count(&r);
            }
            12 => {
                let id = self.id();
                let (offset, max) = (self.rng.u64(), self.rng.u32());
                let r = s::read_output(&id, offset, max);
                self.count(&r);
                if let Ok(range) = r {
                    let end = range.offset.checked_add(range.data.len() as u64);
                    if range.data.len() > 1 << 20 || end.is_none_or(|end| end > range.total_bytes) {
                        self.violation(format!(
                            "read-output({offset}, {max}) gave {} bytes at {} of {}",
                            range.data.len(),
                            range.offset,
                            range.total_bytes
                        ));
                    }
                }
            }
            13 => {
                let id = self.id();
                let max = self.rng.u32();
                let r = s::read_new_output(&id, max);
                self.count(&r);
                if let Ok(range) = r
                    && range.data.len() > 1 << 20
                {
                    self.violation(format!("read-new-output gave {} bytes", range.data.len()));
                }
            }
            14 => {
                let listed = s::list();
                self.calls += 1;
                for snap in listed {
                    if !self.ids.contains(&snap.id) {
                        self.ids.push(snap.id);
                    }
                }
            }
            _ => {
                // The same id twice in a row, the second time maybe after a kill.
                let id = self.id();
                let first = s::check(&id);
                self.count(&first);
                if self.rng.chance(2) {
                    let r = s::kill(&id, Some("SIGKILL"));
                    self.count(&r);
                }
                let again = s::check(&id);
                self.count(&again);
                if first.is_ok() != again.is_ok() {
                    self.violation(format!("check of {id:?} changed from found to not"));
                }
            }
        }
    }

    fn live_sub(&mut self) -> Option<usize> {
        let live: Vec<usize> = (0..self.subs.len())
            .filter(|&i| self.subs[i].is_some())
            .collect();
        if live.is_empty() {
            None
        } else {
            Some(*self.rng.pick(&live))
        }
    }

    /// Ends every session of this plugin still running (background ones
    /// outlive the call), and drops what is held, children first.
    pub fn clean_up(&mut self) {
        self.pollables.clear();
        self.subs.clear();
        for snap in s::list() {
            if matches!(snap.status, s::SessionStatus::Running) {
                let _ = s::kill(&snap.id, Some("SIGKILL"));
            }
        }
    }

    /// A guest fault on purpose, chosen by the seed: a handle used after it
    /// was dropped, a subscription dropped before its pollable, or a handle
    /// the host never gave. Each must trap this call and nothing else.
    pub fn fault(&mut self) -> ! {
        let id = match s::start(&s::StartRequest {
            command: "sleep 0.1".into(),
            cwd: None,
            env: Vec::new(),
            stdin: s::StdinMode::Closed,
            timeout_ms: Some(5000),
            shell: None,
            tool_call_id: None,
        }) {
            Ok(id) => id,
            Err(e) => panic!("fault setup: {e:?}"),
        };
        let sub = s::subscribe(&id, 1).expect("subscribe");
        match self.rng.below(3) {
            0 => {
                let raw = sub.take_handle();
                // SAFETY (a test of the host, not of Rust): the handle is
                // dropped by the host below and then used again.
                let again = unsafe { s::Subscription::from_handle(raw) };
                drop(again);
                let stale = unsafe { s::Subscription::from_handle(raw) };
                let _ = stale.next();
            }
            1 => {
                let p = sub.subscribe();
                drop(sub);
                drop(p);
            }
            _ => {
                let forged = unsafe { s::Subscription::from_handle(0x7fff_fff0) };
                let _ = forged.next();
            }
        }
        unreachable!("the host let a bad handle through");
    }
}

/// The `fuzz` tool's arguments.
pub struct Args {
    pub seed: u64,
    pub steps: usize,
    pub fault: bool,
}

impl Args {
    pub fn parse(text: &str) -> Result<Args, ToolError> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        Ok(Args {
            seed: v["seed"].as_u64().unwrap_or(0),
            steps: v["steps"].as_u64().unwrap_or(200).min(100_000) as usize,
            fault: v["fault"].as_bool().unwrap_or(false),
        })
    }
}

impl World {
    /// `seed S: N calls, E errors`, then each violation on its own line.
    pub fn summary(&self, seed: u64) -> String {
        let mut text = format!("seed {seed}: {} calls, {} errors", self.calls, self.errors);
        for v in &self.violations {
            text.push('\n');
            text.push_str(v);
        }
        text
    }
}
