//! The schedule: what the link does, phase by phase and packet by packet.
//!
//! Parsing is strict (unknown fields are errors) and every error names the field
//! path and the fix, because a schedule is usually written by a test generator and a
//! silently ignored field would make a property test nothing.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// Direction of travel through the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dir {
    /// Client → server: read from the client namespace's device.
    C2s,
    /// Server → client.
    S2c,
}

impl Dir {
    pub const BOTH: [Dir; 2] = [Dir::C2s, Dir::S2c];
    pub fn index(self) -> usize {
        match self {
            Dir::C2s => 0,
            Dir::S2c => 1,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Dir::C2s => "c2s",
            Dir::S2c => "s2c",
        }
    }
}

/// Random loss model of one direction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Loss {
    /// Each packet is lost independently with this probability.
    Iid(f64),
    /// Two-state bursty loss; the state changes are drawn once per packet.
    GilbertElliott(GilbertElliott),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GilbertElliott {
    /// P(good → bad) per packet.
    pub p_good_bad: f64,
    /// P(bad → good) per packet.
    pub p_bad_good: f64,
    /// Loss probability in the good state.
    #[serde(default)]
    pub loss_good: f64,
    /// Loss probability in the bad state.
    #[serde(default = "one")]
    pub loss_bad: f64,
}

fn one() -> f64 {
    1.0
}

/// Settings of one direction during one phase. An absent field means "no impairment".
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSettings {
    /// Bottleneck rate, bits per second. Absent: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_bps: Option<u64>,
    /// mahimahi trace (ms timestamps, one 1500-byte opportunity per line), relative to
    /// the schedule file. Replaced by its contents while loading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<PathBuf>,
    #[serde(skip)]
    pub trace_ms: Vec<u64>,
    /// Drop-tail limit in bytes (the packet in service counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_bytes: Option<u64>,
    /// Drop-tail limit in packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_packets: Option<u64>,
    /// One-way base delay, µs.
    #[serde(default)]
    pub delay_us: u64,
    /// Extra delay drawn uniformly from [0, jitter_us], µs.
    #[serde(default)]
    pub jitter_us: u64,
    /// Whether jitter may reorder packets.
    #[serde(default)]
    pub jitter_reorders: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<Loss>,
    /// ECT packets arriving while the queue holds at least this many bytes get CE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn_threshold_bytes: Option<u64>,
    /// Probability of one extra copy.
    #[serde(default)]
    pub duplicate: f64,
    /// Probability of one flipped bit in the transport payload.
    #[serde(default)]
    pub corrupt: f64,
    /// Drop everything during this phase.
    #[serde(default)]
    pub blackhole: bool,
}

/// Largest time any field may give, µs (about 12.7 days): every time is kept in ns
/// internally, and sums of a few of them must not overflow.
pub const MAX_TIME_US: u64 = 1 << 40;

/// Default queue limit when a rate is set and no limit is given (packets).
pub const DEFAULT_QUEUE_PACKETS: u64 = 1000;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    /// Start of the phase, µs since the link became ready.
    pub start_us: u64,
    #[serde(default)]
    pub c2s: LinkSettings,
    #[serde(default)]
    pub s2c: LinkSettings,
}

impl Phase {
    pub fn settings(&self, dir: Dir) -> &LinkSettings {
        match dir {
            Dir::C2s => &self.c2s,
            Dir::S2c => &self.s2c,
        }
    }
}

/// Selects the packets of one flow: transport protocol and a port on either side.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowMatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proto: Option<Proto>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    Udp,
    Tcp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    Drop,
    Hold,
    Delay,
    Duplicate,
    Corrupt,
    Ce,
    /// The direction drops every packet (of every flow) for `duration_us` from this
    /// packet's arrival, this one included: a blackhole that starts at a packet
    /// rather than at a time (directed schedules place one after a given datagram).
    Outage,
}

/// Default bound on a hold, µs: a held packet is never stranded.
pub const DEFAULT_MAX_HOLD_US: u64 = 1_000_000;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Action {
    pub dir: Dir,
    /// 0-based index among the packets of `dir` (matching `flow`, if given).
    pub index: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<FlowMatch>,
    pub action: ActionKind,
    /// For `hold`: the number of later packets to let pass first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<u64>,
    /// For `hold`: release after this long even if fewer than k packets passed, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_hold_us: Option<u64>,
    /// For `delay`: the extra one-way delay, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_us: Option<u64>,
    /// For `outage`: how long the direction stays dark, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_us: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Every random choice of the link derives from this.
    pub seed: u64,
    pub phases: Vec<Phase>,
    #[serde(default)]
    pub actions: Vec<Action>,
}

/// A schedule that cannot be used; `Display` names the file, the field and the fix.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleError {
    pub file: String,
    pub field: String,
    pub message: String,
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "schedule {}: {}", self.file, self.message)
        } else {
            write!(f, "schedule {}: field {}: {}", self.file, self.field, self.message)
        }
    }
}

impl std::error::Error for ScheduleError {}

impl Schedule {
    /// Reads, parses and validates a schedule file; traces are loaded relative to it.
    pub fn load(path: &Path) -> Result<Schedule, ScheduleError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScheduleError {
            file: file.clone(),
            field: String::new(),
            message: format!("cannot read it ({e}); give the path of a JSON schedule"),
        })?;
        let mut s = Schedule::parse(&text, &file)?;
        s.load_traces(path.parent().unwrap_or(Path::new(".")), &file)?;
        Ok(s)
    }

    /// Parses and validates schedule text; `file` is used in messages only.
    /// Traces are not loaded (see `load`).
    pub fn parse(text: &str, file: &str) -> Result<Schedule, ScheduleError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let s: Schedule = serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            let inner = e.into_inner();
            let hint = if inner.to_string().contains("missing field") {
                "add it (see docs/emulator.md)"
            } else if inner.to_string().contains("unknown field") {
                "remove it or fix its spelling (see docs/emulator.md)"
            } else {
                "see docs/emulator.md for the schedule format"
            };
            ScheduleError {
                file: file.to_string(),
                field: if field == "." { String::new() } else { field },
                message: format!("{inner}; {hint}"),
            }
        })?;
        s.validate(file)?;
        Ok(s)
    }

    fn validate(&self, file: &str) -> Result<(), ScheduleError> {
        let err = |field: String, message: String| ScheduleError {
            file: file.to_string(),
            field,
            message,
        };
        if self.phases.is_empty() {
            return Err(err(
                "phases".into(),
                "is empty; give at least one phase, e.g. [{\"start_us\": 0}]".into(),
            ));
        }
        if self.phases[0].start_us != 0 {
            return Err(err(
                "phases[0].start_us".into(),
                format!("is {}; the first phase must start at 0", self.phases[0].start_us),
            ));
        }
        for (i, w) in self.phases.windows(2).enumerate() {
            if w[1].start_us <= w[0].start_us {
                return Err(err(
                    format!("phases[{}].start_us", i + 1),
                    format!(
                        "is {} but the phase before starts at {}; start times must increase",
                        w[1].start_us, w[0].start_us
                    ),
                ));
            }
        }
        for (i, p) in self.phases.iter().enumerate() {
            time(p.start_us, format!("phases[{i}].start_us")).map_err(|(f, m)| err(f, m))?;
            for dir in Dir::BOTH {
                validate_settings(p.settings(dir), &format!("phases[{i}].{}", dir.name()))
                    .map_err(|(f, m)| err(f, m))?;
            }
        }
        for (i, a) in self.actions.iter().enumerate() {
            validate_action(a, &format!("actions[{i}]")).map_err(|(f, m)| err(f, m))?;
        }
        Ok(())
    }

    fn load_traces(&mut self, base: &Path, file: &str) -> Result<(), ScheduleError> {
        for (i, p) in self.phases.iter_mut().enumerate() {
            for (dir, s) in [(Dir::C2s, &mut p.c2s), (Dir::S2c, &mut p.s2c)] {
                if let Some(t) = &s.trace {
                    let field = format!("phases[{i}].{}.trace", dir.name());
                    s.trace_ms = load_trace(&base.join(t)).map_err(|m| ScheduleError {
                        file: file.to_string(),
                        field,
                        message: m,
                    })?;
                }
            }
        }
        Ok(())
    }
}

type FieldError = (String, String);

fn probability(v: f64, field: String) -> Result<(), FieldError> {
    if !(0.0..=1.0).contains(&v) || v.is_nan() {
        return Err((field, format!("probability {v} is outside [0, 1]; give a fraction such as 0.01")));
    }
    Ok(())
}

fn time(v: u64, field: String) -> Result<(), FieldError> {
    if v > MAX_TIME_US {
        return Err((field, format!("{v} µs is more than the largest time, {MAX_TIME_US} µs (about 12.7 days)")));
    }
    Ok(())
}

fn validate_settings(s: &LinkSettings, at: &str) -> Result<(), FieldError> {
    time(s.delay_us, format!("{at}.delay_us"))?;
    time(s.jitter_us, format!("{at}.jitter_us"))?;
    if s.rate_bps == Some(0) {
        return Err((format!("{at}.rate_bps"), "is 0; give a positive rate in bits/s, or omit it for an unlimited link (use blackhole to drop everything)".into()));
    }
    if s.rate_bps.is_some() && s.trace.is_some() {
        return Err((format!("{at}.trace"), "is given together with rate_bps; keep only one".into()));
    }
    if s.queue_bytes == Some(0) || s.queue_packets == Some(0) {
        return Err((format!("{at}.queue_bytes"), "a queue limit of 0 drops everything; use blackhole for that, or give a positive limit".into()));
    }
    match &s.loss {
        Some(Loss::Iid(p)) => probability(*p, format!("{at}.loss.iid"))?,
        Some(Loss::GilbertElliott(g)) => {
            probability(g.p_good_bad, format!("{at}.loss.gilbert_elliott.p_good_bad"))?;
            probability(g.p_bad_good, format!("{at}.loss.gilbert_elliott.p_bad_good"))?;
            probability(g.loss_good, format!("{at}.loss.gilbert_elliott.loss_good"))?;
            probability(g.loss_bad, format!("{at}.loss.gilbert_elliott.loss_bad"))?;
        }
        None => {}
    }
    probability(s.duplicate, format!("{at}.duplicate"))?;
    probability(s.corrupt, format!("{at}.corrupt"))?;
    Ok(())
}

fn validate_action(a: &Action, at: &str) -> Result<(), FieldError> {
    time(a.extra_us.unwrap_or(0), format!("{at}.extra_us"))?;
    time(a.max_hold_us.unwrap_or(0), format!("{at}.max_hold_us"))?;
    time(a.duration_us.unwrap_or(0), format!("{at}.duration_us"))?;
    let only = |name: &str, present: bool, kind: &str| -> Result<(), FieldError> {
        if present {
            return Err((format!("{at}.{name}"), format!("is not used by action \"{kind}\"; remove it")));
        }
        Ok(())
    };
    match a.action {
        ActionKind::Hold => {
            match a.k {
                None | Some(0) => {
                    return Err((format!("{at}.k"), "hold needs k ≥ 1, the number of later packets to let pass first".into()))
                }
                Some(_) => {}
            }
            only("extra_us", a.extra_us.is_some(), "hold")?;
            only("duration_us", a.duration_us.is_some(), "hold")?;
        }
        ActionKind::Outage => {
            if a.duration_us.unwrap_or(0) == 0 {
                return Err((format!("{at}.duration_us"), "outage needs duration_us ≥ 1, how long the direction stays dark in µs".into()));
            }
            only("k", a.k.is_some(), "outage")?;
            only("max_hold_us", a.max_hold_us.is_some(), "outage")?;
            only("extra_us", a.extra_us.is_some(), "outage")?;
        }
        ActionKind::Delay => {
            if a.extra_us.is_none() {
                return Err((format!("{at}.extra_us"), "delay needs extra_us, the extra one-way delay in µs".into()));
            }
            only("k", a.k.is_some(), "delay")?;
            only("max_hold_us", a.max_hold_us.is_some(), "delay")?;
            only("duration_us", a.duration_us.is_some(), "delay")?;
        }
        ActionKind::Drop | ActionKind::Duplicate | ActionKind::Corrupt | ActionKind::Ce => {
            let kind = format!("{:?}", a.action).to_lowercase();
            only("k", a.k.is_some(), &kind)?;
            only("max_hold_us", a.max_hold_us.is_some(), &kind)?;
            only("extra_us", a.extra_us.is_some(), &kind)?;
            only("duration_us", a.duration_us.is_some(), &kind)?;
        }
    }
    Ok(())
}

/// Reads a mahimahi trace: one integer millisecond timestamp per line, non-decreasing,
/// the last one > 0 (the trace repeats with that period).
pub fn load_trace(path: &Path) -> Result<Vec<u64>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read trace {} ({e}); give a path relative to the schedule file", path.display()))?;
    parse_trace(&text).map_err(|m| format!("trace {}: {m}", path.display()))
}

/// Parses mahimahi trace text (see `load_trace`).
pub fn parse_trace(text: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let v: u64 = line
            .parse()
            .map_err(|_| format!("line {}: {line:?} is not a whole number of milliseconds", n + 1))?;
        if let Some(&last) = out.last() {
            if v < last {
                return Err(format!("line {}: {v} ms is before the previous {last} ms; timestamps must not decrease", n + 1));
            }
        }
        out.push(v);
    }
    match out.last() {
        None => Err("is empty; give one millisecond timestamp per delivery opportunity".into()),
        Some(0) => Err("ends at 0 ms; the last timestamp is the trace's period and must be > 0".into()),
        Some(_) => Ok(out),
    }
}
