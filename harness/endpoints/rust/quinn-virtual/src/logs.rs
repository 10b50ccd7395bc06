//! A host's key log and app log. Below the hosts, not in them: the loop opens the
//! server's once for all its endpoints, each client opens its own.

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::config::Config;
use crate::entropy::KeyLogTo;
use crate::{PROTO_VERSION, VERSION};

/// LL_APPLOG with virtual times: t_us is µs since the link started, and the
/// version record pairs t_us 0 with the epoch, so harness/observe maps the qlog
/// (whose origin is virtual time 0) onto the link's clock as in real time.
/// Shared by the server's endpoints when there are several flows: the real
/// server is one process with one log.
#[derive(Clone)]
pub struct AppLog(Rc<RefCell<BufWriter<File>>>);

impl AppLog {
    fn create(path: &Path, cc: &str, epoch_unix_ns: u64) -> std::io::Result<AppLog> {
        let mut log = AppLog(Rc::new(RefCell::new(BufWriter::new(File::create(path)?))));
        log.line(
            json!({"event": "version", "stack": "quinn", "version": VERSION, "cc": cc,
                        "quinn_proto": PROTO_VERSION, "driver": "longlook-virtual",
                        "t_us": 0, "wall_us": epoch_unix_ns / 1000}),
        );
        Ok(log)
    }

    pub fn line(&mut self, v: Value) {
        let _ = writeln!(self.0.borrow_mut(), "{v}");
    }

    pub fn event(&mut self, now: u64, event: &str, stream: u64, bytes: u64) {
        self.line(json!({"t_us": now / 1000, "event": event, "stream": stream, "bytes": bytes}));
    }

    pub fn flush(&self) -> std::io::Result<()> {
        self.0.borrow_mut().flush()
    }
}

/// A host's key log and app log, in its directory of the run.
#[derive(Clone)]
pub struct Logs {
    pub keylog: Arc<KeyLogTo>,
    pub applog: AppLog,
}

impl Logs {
    pub fn create(config: &Config, dir_name: &str) -> Result<Logs, String> {
        let dir = config.run_dir.join(dir_name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let keylog = KeyLogTo::create(&dir.join("keys.log"))
            .map_err(|e| format!("{dir_name}/keys.log: {e}"))?;
        let applog = AppLog::create(
            &dir.join("app.ndjson"),
            config.cc.name,
            config.epoch_unix_ns,
        )
        .map_err(|e| format!("{dir_name}/app.ndjson: {e}"))?;
        Ok(Logs {
            keylog: Arc::new(keylog),
            applog,
        })
    }
}
