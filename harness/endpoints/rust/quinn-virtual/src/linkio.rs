//! The link's side of a virtual run, shared by quinn-virtual and quiche-virtual
//! (which includes this file): the emulator's core with its ground-truth log and
//! captures, driven as the real-time router drives it.

use link_core::lateness::Lateness;
use link_core::output::{summary, Log, SidePcap};
use link_core::{Dir, Schedule};
use serde_json::{json, Value};
use std::path::Path;

/// The link with its ground-truth log and captures, as the router (and the Python
/// bindings) drive it: a packet is captured on the side it enters from when it
/// arrives, and on the other side at its due time.
pub struct LinkIo {
    pub link: link_core::Link,
    log: Log,
    pcap: [SidePcap; 2],
    start_unix_ns: u64,
}

impl LinkIo {
    /// The link of RUN_DIR/schedule.json, writing link.ndjson and pcap/ there;
    /// `stack` names the run in the log header's argv.
    pub fn open(dir: &Path, stack: &str, epoch_unix_ns: u64) -> Result<LinkIo, String> {
        let io_err = |what: &str, e: std::io::Error| format!("{what}: {e}");
        let schedule = Schedule::load(&dir.join("schedule.json"))
            .map_err(|e| format!("{}: {e}", dir.join("schedule.json").display()))?;
        let link = link_core::Link::new(schedule);
        let argv = vec!["longlook-virtual".to_string(), stack.to_string()];
        let log = Log::create(Some(&dir.join("link.ndjson")), &link, &argv, epoch_unix_ns)
            .map_err(|e| io_err("link.ndjson", e))?;
        std::fs::create_dir_all(dir.join("pcap")).map_err(|e| io_err("pcap/", e))?;
        let pcap = [
            SidePcap::create(&dir.join("pcap"), "client")
                .map_err(|e| io_err("pcap/client.pcap", e))?,
            SidePcap::create(&dir.join("pcap"), "server")
                .map_err(|e| io_err("pcap/server.pcap", e))?,
        ];
        Ok(LinkIo {
            link,
            log,
            pcap,
            start_unix_ns: epoch_unix_ns,
        })
    }

    pub fn send(&mut self, now: u64, dir: Dir, packet: &[u8]) -> std::io::Result<()> {
        self.pcap[dir.index()].write(self.start_unix_ns + now, packet)?;
        self.link.on_packet(now, dir, packet);
        self.drain()
    }

    pub fn poll(&mut self, now: u64) -> std::io::Result<Option<link_core::Transmit>> {
        let Some(t) = self.link.poll_transmit(now) else {
            return Ok(None);
        };
        self.pcap[1 - t.dir.index()].write(self.start_unix_ns + t.due_ns, &t.bytes)?;
        self.drain()?;
        Ok(Some(t))
    }

    fn drain(&mut self) -> std::io::Result<()> {
        while let Some(r) = self.link.poll_record() {
            self.log.record(&r)?;
        }
        Ok(())
    }

    pub fn close(&mut self) -> std::io::Result<serde_json::Value> {
        self.link.shutdown();
        self.drain()?;
        let s = summary(&self.link, &Lateness::default(), 0);
        self.log.finish(&s)?;
        for p in self.pcap.iter_mut() {
            p.close()?;
        }
        Ok(s)
    }
}

/// A host's datagram counts, as both harnesses report them on stdout.
#[derive(Default)]
pub struct Counters {
    pub sent: u64,
    pub received: u64,
    pub corrupt_dropped: u64,
}

impl Counters {
    pub fn to_json(&self) -> Value {
        json!({"sent": self.sent, "received": self.received, "corrupt_dropped": self.corrupt_dropped})
    }
}

/// The name of the `k`-th host of a role (1-based): "client", "client-2", … as the
/// real testbed names its extra clients' directories.
pub fn numbered(role: &str, k: usize) -> String {
    if k == 1 {
        role.to_string()
    } else {
        format!("{role}-{k}")
    }
}
