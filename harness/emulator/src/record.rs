//! The ground-truth record: one per packet, written once its fate is final.

use crate::schedule::Dir;
use std::io::{self, Write};
use std::sync::Arc;

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    Blackhole,
    LossIndex,
    LossIid,
    LossGe,
    QueueFull,
    Malformed,
}

impl DropReason {
    pub const ALL: [DropReason; 6] = [
        DropReason::Blackhole,
        DropReason::LossIndex,
        DropReason::LossIid,
        DropReason::LossGe,
        DropReason::QueueFull,
        DropReason::Malformed,
    ];
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Blackhole => "blackhole",
            DropReason::LossIndex => "loss_index",
            DropReason::LossIid => "loss_iid",
            DropReason::LossGe => "loss_ge",
            DropReason::QueueFull => "queue_full",
            DropReason::Malformed => "malformed",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fate {
    Delivered,
    Dropped(DropReason),
    /// The extra copy made by duplication.
    Duplicate,
    /// Still inside the link when it stopped.
    InFlight,
}

impl Fate {
    pub fn name(self) -> &'static str {
        match self {
            Fate::Delivered => "delivered",
            Fate::Dropped(_) => "dropped",
            Fate::Duplicate => "duplicate",
            Fate::InFlight => "in_flight",
        }
    }
}

/// What was done to a packet that was not dropped (a bit set).
pub mod marks {
    pub const CE: u8 = 1;
    pub const HELD: u8 = 2;
    pub const EXTRA_DELAY: u8 = 4;
    pub const CORRUPT: u8 = 8;
    pub const REORDERED_BY_JITTER: u8 = 16;
    pub const NAMES: [(u8, &str); 5] = [
        (CE, "ce"),
        (HELD, "held"),
        (EXTRA_DELAY, "extra_delay"),
        (CORRUPT, "corrupt"),
        (REORDERED_BY_JITTER, "reordered_by_jitter"),
    ];
}

/// One packet's ground truth. Times are ns since the link became ready.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub dir: Dir,
    /// 0-based arrival index in this direction.
    pub idx: u64,
    /// 0-based arrival index in this direction's 5-tuple flow.
    pub fidx: u64,
    /// The 5-tuple as text (shared by all packets of the flow).
    pub flow: Arc<str>,
    pub proto: &'static str,
    pub sport: u16,
    pub dport: u16,
    /// IP packet size in bytes.
    pub size: u32,
    pub arr_ns: u64,
    pub fate: Fate,
    /// Scheduled departure (write) time, for delivered packets and copies.
    pub dep_ns: Option<u64>,
    /// Bytes in the bottleneck queue when the packet arrived.
    pub qbytes: u64,
    pub marks: u8,
}

impl Record {
    /// Writes the record as one NDJSON line (times in µs, 3 decimals).
    pub fn write_json<W: Write>(&self, w: &mut W) -> io::Result<()> {
        write!(
            w,
            "{{\"dir\":\"{}\",\"idx\":{},\"fidx\":{},\"flow\":\"{}\",\"proto\":\"{}\",\"sport\":{},\"dport\":{},\"size\":{},\"arr_us\":{},\"fate\":\"{}\",",
            self.dir.name(),
            self.idx,
            self.fidx,
            self.flow,
            self.proto,
            self.sport,
            self.dport,
            self.size,
            Micros(self.arr_ns),
            self.fate.name()
        )?;
        match self.fate {
            Fate::Dropped(r) => write!(w, "\"reason\":\"{}\",", r.name())?,
            _ => write!(w, "\"reason\":null,")?,
        }
        match self.dep_ns {
            Some(d) => write!(w, "\"dep_us\":{},", Micros(d))?,
            None => write!(w, "\"dep_us\":null,")?,
        }
        write!(w, "\"qbytes\":{},\"marks\":[", self.qbytes)?;
        let mut first = true;
        for (bit, name) in marks::NAMES {
            if self.marks & bit != 0 {
                write!(w, "{}\"{}\"", if first { "" } else { "," }, name)?;
                first = false;
            }
        }
        writeln!(w, "]}}")
    }
}

/// Nanoseconds shown as microseconds with three decimals, exactly.
pub struct Micros(pub u64);

impl std::fmt::Display for Micros {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}
