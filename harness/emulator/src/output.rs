//! Where the router's ground truth goes: the NDJSON log (header, one line per packet,
//! summary) and the optional per-side pcap files.

use longlook_link::lateness::Lateness;
use longlook_link::{Counters, Dir, DropReason, Link, Record};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};
use serde_json::json;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Duration;

pub struct Log {
    out: BufWriter<Box<dyn Write>>,
}

impl Log {
    /// Opens the log (`None`: records are discarded) and writes the header line.
    pub fn create(path: Option<&Path>, link: &Link, argv: &[String], start_unix_ns: u64) -> io::Result<Log> {
        let sink: Box<dyn Write> = match path {
            Some(p) => Box::new(File::create(p)?),
            None => Box::new(io::sink()),
        };
        let mut out = BufWriter::with_capacity(1 << 20, sink);
        let header = json!({
            "longlook_link": env!("CARGO_PKG_VERSION"),
            "schedule": link.schedule(),
            "seed": link.schedule().seed,
            "argv": argv,
            "start_unix_ns": start_unix_ns,
        });
        serde_json::to_writer(&mut out, &header)?;
        out.write_all(b"\n")?;
        Ok(Log { out })
    }

    pub fn record(&mut self, r: &Record) -> io::Result<()> {
        r.write_json(&mut self.out)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Writes the closing summary line and flushes.
    pub fn finish(&mut self, summary: &serde_json::Value) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, &json!({ "summary": summary }))?;
        self.out.write_all(b"\n")?;
        self.out.flush()
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
