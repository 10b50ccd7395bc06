//! The stateful pieces of one direction's pipeline: seeded draws, loss models and the
//! bottleneck's service clock (fixed rate or mahimahi trace).

use crate::schedule::{Dir, GilbertElliott, LinkSettings};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Independent random streams; each stage draws from its own so that changing one
/// impairment (say, less jitter while shrinking) leaves the others' choices unchanged.
#[derive(Clone, Copy, Debug)]
pub enum Stream {
    Loss = 0,
    Jitter = 1,
    Duplicate = 2,
    Corrupt = 3,
}

/// Counter-based random draws: the value for (direction, stream, packet index, k) is a
/// pure function of the seed, so a packet's fate does not depend on how many draws
/// other packets needed.
pub struct Draws {
    rng: ChaCha8Rng,
    dir: Dir,
}

impl Draws {
    pub fn new(seed: u64, dir: Dir) -> Draws {
        Draws { rng: ChaCha8Rng::seed_from_u64(seed), dir }
    }

    /// A uniform value in [0, 1) for draw `k` (< 8) of packet `idx` in `stream`.
    pub fn unit(&mut self, stream: Stream, idx: u64, k: u64) -> f64 {
        self.position(stream, idx, k);
        self.rng.gen::<f64>()
    }

    /// A uniform u64 for draw `k` (< 8) of packet `idx` in `stream`.
    pub fn word(&mut self, stream: Stream, idx: u64, k: u64) -> u64 {
        self.position(stream, idx, k);
        self.rng.gen::<u64>()
    }

    fn position(&mut self, stream: Stream, idx: u64, k: u64) {
        debug_assert!(k < 8);
        self.rng.set_stream((stream as u64) * 2 + self.dir.index() as u64);
        // 16 32-bit words per packet index: 8 draws of one u64 each.
        self.rng.set_word_pos(u128::from(idx) * 16 + u128::from(k) * 2);
    }
}

/// Gilbert-Elliott channel state, carried across packets of one direction.
#[derive(Debug, Default)]
pub struct GeState {
    pub bad: bool,
}

impl GeState {
    /// Advances the state for packet `idx` and says whether it is lost.
    pub fn step(&mut self, g: &GilbertElliott, draws: &mut Draws, idx: u64) -> bool {
        let flip = draws.unit(Stream::Loss, idx, 1);
        if self.bad {
            if flip < g.p_bad_good {
                self.bad = false;
            }
        } else if flip < g.p_good_bad {
            self.bad = true;
        }
        let p = if self.bad { g.loss_bad } else { g.loss_good };
        draws.unit(Stream::Loss, idx, 2) < p
    }
}

/// Bytes one mahimahi delivery opportunity carries.
pub const OPPORTUNITY_BYTES: u64 = 1500;

/// The bottleneck's service clock: when does a packet that starts service at `start`
/// finish? Traces keep a little state (bytes left over at the last opportunity).
#[derive(Debug, Default)]
pub struct Service {
    /// Time of the last trace opportunity used, ns, and bytes it has left.
    opp_time: u64,
    opp_left: u64,
    /// Index of the first opportunity not used yet.
    next_opp: u64,
}

impl Service {
    /// Finish time, ns, of a packet of `size` bytes entering service at `start` ns.
    /// `None` means the link has no rate limit (the packet passes at once).
    pub fn finish(&mut self, s: &LinkSettings, start: u64, size: u64) -> Option<u64> {
        if let Some(rate) = s.rate_bps {
            let bits = u128::from(size) * 8 * 1_000_000_000;
            let ns = bits.div_ceil(u128::from(rate));
            return Some(start + ns as u64);
        }
        if s.trace_ms.is_empty() {
            return None;
        }
        Some(self.trace_finish(&s.trace_ms, start, size))
    }

    fn trace_finish(&mut self, trace: &[u64], start: u64, size: u64) -> u64 {
        let mut need = size;
        // Bytes left at an opportunity that happened while this packet was waiting.
        if self.opp_left > 0 && self.opp_time >= start {
            let used = need.min(self.opp_left);
            self.opp_left -= used;
            need -= used;
            if need == 0 {
                return self.opp_time;
            }
        }
        let mut j = first_opportunity_at_or_after(trace, start).max(self.next_opp);
        loop {
            let t = opportunity_time(trace, j);
            if need <= OPPORTUNITY_BYTES {
                self.opp_time = t;
                self.opp_left = OPPORTUNITY_BYTES - need;
                self.next_opp = j + 1;
                return t;
            }
            need -= OPPORTUNITY_BYTES;
            j += 1;
        }
    }
}

const MS: u64 = 1_000_000;

/// Time, ns, of opportunity `j` of a repeating trace.
fn opportunity_time(trace: &[u64], j: u64) -> u64 {
    let n = trace.len() as u64;
    let period = trace[trace.len() - 1] * MS;
    (j / n) * period + trace[(j % n) as usize] * MS
}

/// Index of the first opportunity at or after `t` ns.
fn first_opportunity_at_or_after(trace: &[u64], t: u64) -> u64 {
    let n = trace.len() as u64;
    let period = trace[trace.len() - 1] * MS;
    let cycle = t / period;
    let within = t - cycle * period;
    let pos = trace.partition_point(|&ms| ms * MS < within) as u64;
    cycle * n + pos
}

/// Uniform jitter in [0, jitter_us] µs, as ns.
pub fn jitter_ns(s: &LinkSettings, draws: &mut Draws, idx: u64) -> u64 {
    if s.jitter_us == 0 {
        return 0;
    }
    let u = draws.unit(Stream::Jitter, idx, 0);
    (u * (s.jitter_us as f64 * 1000.0)).round() as u64
}
