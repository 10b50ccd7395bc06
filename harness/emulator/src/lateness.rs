//! Lateness of the router: actual write time minus scheduled departure. Kept as a
//! 1 µs-resolution histogram up to 100 ms (plus overflow), so percentiles are exact
//! to the microsecond and memory is fixed.

const BUCKETS: usize = 100_000;

pub struct Lateness {
    counts: Vec<u32>,
    overflow: u64,
    early: u64,
    total: u64,
    max_ns: u64,
}

impl Default for Lateness {
    fn default() -> Self {
        Lateness { counts: vec![0; BUCKETS], overflow: 0, early: 0, total: 0, max_ns: 0 }
    }
}

impl Lateness {
    /// Records one packet written at `actual_ns`, scheduled for `due_ns`.
    pub fn add(&mut self, due_ns: u64, actual_ns: u64) {
        self.total += 1;
        if actual_ns < due_ns {
            // Written early, within the delivery slice: counts as 0 µs late.
            self.early += 1;
            self.counts[0] = self.counts[0].saturating_add(1);
            return;
        }
        let late = actual_ns - due_ns;
        self.max_ns = self.max_ns.max(late);
        match self.counts.get_mut((late / 1000) as usize) {
            Some(c) => *c = c.saturating_add(1),
            None => self.overflow += 1,
        }
    }

    /// The q-quantile (0..=1) in µs, or None when nothing was recorded.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let want = ((q * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (us, &c) in self.counts.iter().enumerate() {
            seen += u64::from(c);
            if seen >= want {
                return Some(us as u64);
            }
        }
        Some(BUCKETS as u64)
    }

    /// The summary as a JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "count": self.total,
            "early": self.early,
            "p50_us": self.quantile_us(0.5),
            "p90_us": self.quantile_us(0.9),
            "p99_us": self.quantile_us(0.99),
            "p999_us": self.quantile_us(0.999),
            "max_us": self.max_ns as f64 / 1000.0,
            "over_100ms": self.overflow,
        })
    }
}
