//! Where the router's ground truth goes: the NDJSON log (header, one line per packet,
//! summary) and the optional per-side pcap files.

use crate::lateness::Lateness;
use crate::{Counters, Dir, DropReason, Link, Record};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};
use serde_json::json;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;
use std::time::Duration;

/// The ground-truth log. Lines are formatted on the router thread into chunks that a
/// writer thread puts in the file: page-cache writeback can stall a write(2) for tens
/// of milliseconds, which must not delay packets. Memory stays bounded: at most
/// `CHUNKS_IN_FLIGHT` chunks wait for the writer before the router waits too.
pub struct Log {
    inner: Option<LogWriter>,
}

struct LogWriter {
    chunk: Vec<u8>,
    tx: Option<SyncSender<Vec<u8>>>,
    recycled: Receiver<Vec<u8>>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

const CHUNK_BYTES: usize = 256 * 1024;
const CHUNKS_IN_FLIGHT: usize = 32;

impl Log {
    /// Opens the log (`None`: records are discarded) and writes the header line.
    pub fn create(path: Option<&Path>, link: &Link, argv: &[String], start_unix_ns: u64) -> io::Result<Log> {
        let Some(path) = path else { return Ok(Log { inner: None }) };
        let mut file = BufWriter::with_capacity(CHUNK_BYTES, File::create(path)?);
        let header = json!({
            "longlook_link": env!("CARGO_PKG_VERSION"),
            "schedule": link.schedule(),
            "seed": link.schedule().seed,
            "argv": argv,
            "start_unix_ns": start_unix_ns,
        });
        serde_json::to_writer(&mut file, &header)?;
        file.write_all(b"\n")?;
        file.flush()?;
        let (tx, rx) = sync_channel::<Vec<u8>>(CHUNKS_IN_FLIGHT);
        let (back, recycled) = sync_channel::<Vec<u8>>(CHUNKS_IN_FLIGHT);
        let thread = std::thread::Builder::new().name("log-writer".into()).spawn(move || {
            for mut chunk in rx {
                file.write_all(&chunk)?;
                file.flush()?;
                chunk.clear();
                let _ = back.try_send(chunk);
            }
            file.flush()
        })?;
        let inner = LogWriter { chunk: Vec::with_capacity(CHUNK_BYTES), tx: Some(tx), recycled, thread: Some(thread) };
        Ok(Log { inner: Some(inner) })
    }

    pub fn record(&mut self, r: &Record) -> io::Result<()> {
        let Some(w) = &mut self.inner else { return Ok(()) };
        r.write_json(&mut w.chunk)?;
        if w.chunk.len() >= CHUNK_BYTES {
            w.send()?;
        }
        Ok(())
    }

    /// Hands what is formatted so far to the writer.
    pub fn flush(&mut self) -> io::Result<()> {
        match &mut self.inner {
            Some(w) if !w.chunk.is_empty() => w.send(),
            _ => Ok(()),
        }
    }

    /// Writes the closing summary line and waits until everything is in the file.
    pub fn finish(&mut self, summary: &serde_json::Value) -> io::Result<()> {
        let Some(w) = &mut self.inner else { return Ok(()) };
        serde_json::to_writer(&mut w.chunk, &json!({ "summary": summary }))?;
        w.chunk.push(b'\n');
        w.send()?;
        drop(w.tx.take());
        match w.thread.take().map(|t| t.join()) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(io::Error::other("log writer thread panicked")),
            None => Ok(()),
        }
    }
}

impl LogWriter {
    fn send(&mut self) -> io::Result<()> {
        let fresh = self.recycled.try_recv().unwrap_or_else(|_| Vec::with_capacity(CHUNK_BYTES));
        let full = std::mem::replace(&mut self.chunk, fresh);
        let tx = self.tx.as_ref().ok_or_else(|| io::Error::other("log already finished"))?;
        tx.send(full).map_err(|_| io::Error::other("log writer stopped (disk full or file error?)"))
    }
}

/// Counters and lateness as one JSON object (the log's summary and `stats` reply).
pub fn summary(link: &Link, lateness: &Lateness, write_errors: u64) -> serde_json::Value {
    let dir = |c: &Counters| {
        let dropped: serde_json::Map<String, serde_json::Value> =
            DropReason::ALL.iter().zip(c.dropped).map(|(r, n)| (r.name().to_string(), n.into())).collect();
        json!({
            "arrived": c.arrived, "delivered": c.delivered, "delivered_bytes": c.delivered_bytes,
            "duplicates": c.duplicates, "ce_marked": c.ce_marked, "in_flight": c.in_flight,
            "dropped": dropped,
        })
    };
    json!({
        "c2s": dir(link.counters(Dir::C2s)),
        "s2c": dir(link.counters(Dir::S2c)),
        "lateness": lateness.to_json(),
        "write_errors": write_errors,
    })
}

/// pcap of one side of the link: what entered from it and what left toward it.
pub struct SidePcap {
    w: Option<PcapWriter<BufWriter<File>>>,
}

impl SidePcap {
    pub fn create(dir: &Path, side: &str) -> io::Result<SidePcap> {
        let f = BufWriter::with_capacity(1 << 20, File::create(dir.join(format!("{side}.pcap")))?);
        let header = PcapHeader {
            datalink: DataLink::RAW,
            snaplen: 65535,
            ts_resolution: TsResolution::NanoSecond,
            ..Default::default()
        };
        let w = PcapWriter::with_header(f, header).map_err(io::Error::other)?;
        Ok(SidePcap { w: Some(w) })
    }

    pub fn write(&mut self, unix_ns: u64, bytes: &[u8]) -> io::Result<()> {
        let Some(w) = self.w.as_mut() else { return Ok(()) };
        let pkt = PcapPacket::new(Duration::from_nanos(unix_ns), bytes.len() as u32, bytes);
        w.write_packet(&pkt).map(|_| ()).map_err(io::Error::other)
    }

    /// Flushes and closes the file; later writes are ignored.
    pub fn close(&mut self) -> io::Result<()> {
        match self.w.take() {
            Some(w) => w.into_writer().flush(),
            None => Ok(()),
        }
    }
}
