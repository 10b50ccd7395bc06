//! A qlog 0.3 (JSON-SEQ) trace per connection, written from s2n-quic's event
//! subscriber API: s2n-quic has no qlog writer of its own, and its events carry
//! what the suite reads from a qlog (docs/trace.md).
//!
//! Mapping, event by event:
//! - `PacketSent` (+ the `FrameSent`s of that packet) → `transport:packet_sent`
//!   with the packet's length and frame types (ack-eliciting or not);
//! - `PacketReceived` (+ its `FrameReceived`s and `AckRangeReceived`s) →
//!   `transport:packet_received` with its frame types,
//!   the `ack` frame with those ranges. s2n-quic publishes a packet before its
//!   frames, so the packet is held until the next other event and written then:
//!   the file keeps cause (the ACK) before effect (losses, the new window);
//! - `PacketLost` → `recovery:packet_lost` (no trigger: s2n-quic gives none);
//! - `RecoveryMetrics` → `recovery:metrics_updated` with the fields that changed
//!   since the last one (s2n-quic publishes after every ACK, timeout and send).
//! s2n-quic reports no ssthresh and no congestion state: states are left to the
//! suite's inference, as for tquic. Times are ms since the connection's first
//! event, on s2n-quic's own clock (the timestamp each event carries); the header
//! gives that origin as wall-clock reference_time and, in the description, in
//! CLOCK_MONOTONIC µs.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use ll_endpoint_common::applog::monotonic_us;
use ll_endpoint_common::exit::{self, EventLines};
use ll_endpoint_common::{hex, random_bytes, Role};
use s2n_quic::provider::event::{events, ConnectionInfo, ConnectionMeta, Subscriber};
use serde_json::{json, Map, Value};

use crate::{STACK, VERSION};

/// Creates one trace per connection in QLOGDIR (none when QLOGDIR is unset).
pub struct Qlog {
    pub dir: Option<PathBuf>,
    pub role: Role,
}

/// A received packet, held until its frames have been reported.
struct Received {
    time: f64,
    ptype: &'static str,
    pn: u64,
    frames: Vec<&'static str>,
    ranges: Vec<[u64; 2]>,
}

/// One connection's trace: the file and what is held back until it can be written.
pub struct Trace {
    out: Option<EventLines>,
    /// s2n-quic's timestamp of the connection's first event: time 0 of the trace.
    origin: Duration,
    /// A received packet waiting for its frames and ACK ranges.
    received: Option<Received>,
    /// Frames of the packet being built: (type, number, frame type).
    frames: Vec<(&'static str, u64, &'static str)>,
    /// The last metrics written, to write only what changed.
    metrics: Map<String, Value>,
}

impl Subscriber for Qlog {
    type ConnectionContext = Trace;

    fn create_connection_context(&mut self, meta: &ConnectionMeta, _: &ConnectionInfo) -> Trace {
        let origin = meta.timestamp.duration_since_start();
        let out = self.dir.as_ref().and_then(|dir| match open(dir, self.role) {
            Ok(out) => Some(out),
            Err(e) => {
                // The transfer still runs; the harness reports the missing trace.
                eprintln!("qlog: cannot create a trace in {}: {e}", dir.display());
                None
            }
        });
        Trace { out, origin, received: None, frames: Vec::new(), metrics: Map::new() }
    }

    fn on_frame_sent(&mut self, t: &mut Trace, _: &ConnectionMeta, e: &events::FrameSent) {
        if let Some((ptype, pn)) = packet(&e.packet_header) {
            t.frames.push((ptype, pn, frame_type(&e.frame)));
        }
    }

    fn on_packet_sent(&mut self, t: &mut Trace, meta: &ConnectionMeta, e: &events::PacketSent) {
        let Some((ptype, pn)) = packet(&e.packet_header) else { return };
        let frames: Vec<Value> = t
            .frames
            .iter()
            .filter(|f| f.0 == ptype && f.1 == pn)
            .map(|f| json!({"frame_type": f.2}))
            .collect();
        t.frames.clear();
        let data = json!({
            "header": {"packet_type": ptype, "packet_number": pn},
            "raw": {"length": e.packet_len},
            "frames": frames,
        });
        t.write(meta, "transport:packet_sent", data);
    }

    fn on_packet_received(&mut self, t: &mut Trace, meta: &ConnectionMeta, e: &events::PacketReceived) {
        t.flush_received();
        if let Some((ptype, pn)) = packet(&e.packet_header) {
            let time = t.ms(meta);
            t.received = Some(Received { time, ptype, pn, frames: Vec::new(), ranges: Vec::new() });
        }
    }

    fn on_ack_range_received(&mut self, t: &mut Trace, _: &ConnectionMeta, e: &events::AckRangeReceived) {
        let Some((ptype, pn)) = packet(&e.packet_header) else { return };
        if let Some(r) = t.received.as_mut().filter(|r| r.ptype == ptype && r.pn == pn) {
            r.ranges.push([*e.ack_range.start(), *e.ack_range.end()]);
        }
    }

    fn on_frame_received(&mut self, t: &mut Trace, _: &ConnectionMeta, e: &events::FrameReceived) {
        let Some((ptype, pn)) = packet(&e.packet_header) else { return };
        if let Some(r) = t.received.as_mut().filter(|r| r.ptype == ptype && r.pn == pn) {
            r.frames.push(frame_type(&e.frame));
        }
    }

    fn on_packet_lost(&mut self, t: &mut Trace, meta: &ConnectionMeta, e: &events::PacketLost) {
        let Some((ptype, pn)) = packet(&e.packet_header) else { return };
        let data = json!({"header": {"packet_type": ptype, "packet_number": pn}});
        t.write(meta, "recovery:packet_lost", data);
    }

    fn on_recovery_metrics(&mut self, t: &mut Trace, meta: &ConnectionMeta, e: &events::RecoveryMetrics) {
        let ms = |d: Duration| Value::from(d.as_secs_f64() * 1000.0);
        let now = [
            ("min_rtt", ms(e.min_rtt)),
            ("smoothed_rtt", ms(e.smoothed_rtt)),
            ("latest_rtt", ms(e.latest_rtt)),
            ("rtt_variance", ms(e.rtt_variance)),
            ("pto_count", Value::from(e.pto_count)),
            ("congestion_window", Value::from(e.congestion_window)),
            ("bytes_in_flight", Value::from(e.bytes_in_flight)),
        ];
        let mut changed = Map::new();
        for (k, v) in now {
            if t.metrics.get(k) != Some(&v) {
                t.metrics.insert(k.to_string(), v.clone());
                changed.insert(k.to_string(), v);
            }
        }
        if !changed.is_empty() {
            t.write(meta, "recovery:metrics_updated", Value::Object(changed));
        }
    }

    fn on_connection_closed(&mut self, t: &mut Trace, _: &ConnectionMeta, _: &events::ConnectionClosed) {
        t.flush_received();
        if let Some(out) = t.out.as_mut() {
            let _ = out.flush();
        }
    }
}

impl Trace {
    fn ms(&self, meta: &ConnectionMeta) -> f64 {
        let since = meta.timestamp.duration_since_start().saturating_sub(self.origin);
        since.as_secs_f64() * 1000.0
    }

    fn write(&mut self, meta: &ConnectionMeta, name: &str, data: Value) {
        self.flush_received();
        let time = self.ms(meta);
        self.line(time, name, data);
    }

    /// Writes the held-back received packet, with its ACK frame if it had one.
    fn flush_received(&mut self) {
        if let Some(r) = self.received.take() {
            // The ACK frame (at most one per packet) carries the ranges reported for it.
            let mut ranges = Some(r.ranges);
            let frames: Vec<Value> = r
                .frames
                .iter()
                .map(|&f| match (f, ranges.take_if(|_| f == "ack")) {
                    ("ack", Some(acked)) => json!({"frame_type": "ack", "acked_ranges": acked}),
                    _ => json!({"frame_type": f}),
                })
                .collect();
            let data = json!({"header": {"packet_type": r.ptype, "packet_number": r.pn}, "frames": frames});
            self.line(r.time, "transport:packet_received", data);
        }
    }

    fn line(&mut self, time: f64, name: &str, data: Value) {
        if let Some(out) = self.out.as_mut() {
            let event = json!({"time": time, "name": name, "data": data});
            // One write per event: EventLines passes whole lines to the file.
            let _ = out.write_all(format!("\x1e{event}\n").as_bytes());
        }
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        self.flush_received();
    }
}

/// `DIR/ROLE-ID.sqlog` with a random ID (s2n-quic does not expose the original
/// DCID when the connection is created), and the JSON-SEQ header.
fn open(dir: &std::path::Path, role: Role) -> std::io::Result<EventLines> {
    let id = hex(&random_bytes(8)?);
    let mut out = EventLines::new(exit::qlog_file(dir, role.as_str(), &id)?);
    let title = format!("longlook {STACK} {VERSION} {}", role.as_str());
    // The same instant on both clocks: the wall clock as qlog's reference_time (ms
    // since the epoch), CLOCK_MONOTONIC (the ground truth's) in the description.
    let wall_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    let description = format!("reference_time_monotonic_us={}", monotonic_us());
    let header = json!({
        "qlog_version": "0.3",
        "qlog_format": "JSON-SEQ",
        "title": title,
        "description": description,
        "trace": {
            "vantage_point": {"type": role.as_str()},
            "title": title,
            "description": description,
            "common_fields": {"reference_time": wall_ms, "time_format": "relative"},
            "configuration": {"time_offset": 0.0},
        },
    });
    out.write_all(format!("\x1e{header}\n").as_bytes())?;
    Ok(out)
}

/// (qlog packet type, packet number) of a packet that has a number.
fn packet(h: &events::PacketHeader) -> Option<(&'static str, u64)> {
    match h {
        events::PacketHeader::Initial { number, .. } => Some(("initial", *number)),
        events::PacketHeader::Handshake { number, .. } => Some(("handshake", *number)),
        events::PacketHeader::ZeroRtt { number, .. } => Some(("0RTT", *number)),
        events::PacketHeader::OneRtt { number, .. } => Some(("1RTT", *number)),
        _ => None,
    }
}

/// The qlog name of a frame type (RFC 9000 §19, qlog's snake case).
fn frame_type(f: &events::Frame) -> &'static str {
    use events::Frame as F;
    match f {
        F::Padding { .. } => "padding",
        F::Ping { .. } => "ping",
        F::Ack { .. } => "ack",
        F::ResetStream { .. } => "reset_stream",
        F::StopSending { .. } => "stop_sending",
        F::Crypto { .. } => "crypto",
        F::NewToken { .. } => "new_token",
        F::Stream { .. } => "stream",
        F::MaxData { .. } => "max_data",
        F::MaxStreamData { .. } => "max_stream_data",
        F::MaxStreams { .. } => "max_streams",
        F::DataBlocked { .. } => "data_blocked",
        F::StreamDataBlocked { .. } => "stream_data_blocked",
        F::StreamsBlocked { .. } => "streams_blocked",
        F::NewConnectionId { .. } => "new_connection_id",
        F::RetireConnectionId { .. } => "retire_connection_id",
        F::PathChallenge { .. } => "path_challenge",
        F::PathResponse { .. } => "path_response",
        F::ConnectionClose { .. } => "connection_close",
        F::HandshakeDone { .. } => "handshake_done",
        F::Datagram { .. } => "datagram",
        // s2n-quic's own extension frames (and any added later): ack-eliciting.
        _ => "unknown",
    }
}
