//! Order statistics over samples and the human formats the table prints.

use std::time::Duration;

/// Median, p99, min and max of a set of durations.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    /// How many samples.
    pub n: usize,
    /// The median (the mean of the two middle samples for an even count).
    pub median: Duration,
    /// The 99th percentile (nearest rank).
    pub p99: Duration,
    /// The fastest sample.
    pub min: Duration,
    /// The slowest sample.
    pub max: Duration,
}

impl Summary {
    /// Summarises `samples` (must not be empty).
    pub fn of(mut samples: Vec<Duration>) -> Summary {
        assert!(!samples.is_empty(), "no samples");
        samples.sort_unstable();
        let n = samples.len();
        let rank = |p: f64| samples[(((n as f64) * p).ceil() as usize).clamp(1, n) - 1];
        Summary {
            n,
            median: (samples[(n - 1) / 2] + samples[n / 2]) / 2,
            p99: rank(0.99),
            min: samples[0],
            max: samples[n - 1],
        }
    }

    /// `median 8.1 µs (p99 12 µs, min 7.9 µs, max 40 µs, n 10000)`.
    pub fn describe(&self) -> String {
        format!(
            "median {} (p99 {}, min {}, max {}, n {})",
            duration(self.median),
            duration(self.p99),
            duration(self.min),
            duration(self.max),
            self.n
        )
    }
}

/// The median of plain numbers (the mean of the two middle values for an even
/// count).
pub fn median(mut values: Vec<f64>) -> f64 {
    assert!(!values.is_empty(), "no values");
    values.sort_by(f64::total_cmp);
    let n = values.len();
    (values[(n - 1) / 2] + values[n / 2]) / 2.0
}

/// A duration with three significant digits and a unit: `812 ns`, `8.12 µs`,
/// `1.23 ms`, `2.50 s`.
pub fn duration(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    let (value, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    format!("{} {unit}", sig3(value))
}

/// A byte count in binary units: `512 B`, `12.0 KiB`, `3.25 MiB`, `1.00 GiB`.
pub fn bytes(b: f64) -> String {
    let (value, unit) = if b.abs() < 1024.0 {
        (b, "B")
    } else if b.abs() < 1024.0 * 1024.0 {
        (b / 1024.0, "KiB")
    } else if b.abs() < 1024.0 * 1024.0 * 1024.0 {
        (b / 1024.0 / 1024.0, "MiB")
    } else {
        (b / 1024.0 / 1024.0 / 1024.0, "GiB")
    };
    format!("{} {unit}", sig3(value))
}

/// A rate with three significant digits: `1.23M/s`, `456k/s`.
pub fn rate(per_second: f64) -> String {
    if per_second >= 1e6 {
        format!("{}M/s", sig3(per_second / 1e6))
    } else if per_second >= 1e3 {
        format!("{}k/s", sig3(per_second / 1e3))
    } else {
        format!("{}/s", sig3(per_second))
    }
}

fn sig3(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_statistics() {
        let s = Summary::of((1..=100).rev().map(Duration::from_micros).collect());
        assert_eq!(s.n, 100);
        assert_eq!(s.median, Duration::from_nanos(50_500));
        assert_eq!(s.p99, Duration::from_micros(99));
        assert_eq!(s.min, Duration::from_micros(1));
        assert_eq!(s.max, Duration::from_micros(100));
        let one = Summary::of(vec![Duration::from_millis(3)]);
        assert_eq!((one.median, one.p99), (one.min, one.max));
        assert_eq!(median(vec![3.0, 1.0, 2.0, 10.0]), 2.5);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    }

    #[test]
    fn formats() {
        assert_eq!(duration(Duration::from_nanos(812)), "812 ns");
        assert_eq!(duration(Duration::from_nanos(8_120)), "8.12 µs");
        assert_eq!(duration(Duration::from_micros(1_234)), "1.23 ms");
        assert_eq!(duration(Duration::from_millis(2_500)), "2.50 s");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(12.0 * 1024.0), "12.0 KiB");
        assert_eq!(bytes((1u64 << 30) as f64), "1.00 GiB");
        assert_eq!(rate(1_234_000.0), "1.23M/s");
        assert_eq!(rate(456_000.0), "456k/s");
    }
}
