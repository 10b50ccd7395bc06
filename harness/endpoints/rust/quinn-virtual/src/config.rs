//! The run's inputs: the JSON object harness/virtual writes on stdin, checked field
//! by field, so a bad value is named with the fix instead of failing mid-run.

use std::path::PathBuf;

use serde_json::Value;

use crate::cc;

pub enum Bad {
    Input(String),
    Unsupported(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Testcase {
    Transfer,
    Multiplexing,
    Appidle,
}

#[derive(Clone)]
pub struct Config {
    pub run_dir: PathBuf,
    /// Object names in www/, fetched in this order.
    pub names: Vec<String>,
    pub testcase: Testcase,
    pub think_ns: u64,
    pub cc: &'static cc::Entry,
    pub max_datagram_size: u16,
    /// Packets (the contract's unit); None: quinn's default.
    pub initial_window: Option<u64>,
    pub flow_window: u64,
    pub timeout_ns: u64,
    /// Seeds both hosts' entropy (harness/virtual passes schedule seed ⊕ plan seed).
    pub seed: u64,
    pub qlog: bool,
    /// Competing flows: client k (port 40000 + k - 1) fetches the objects from
    /// server endpoint k, all at once.
    pub clients: usize,
    /// Wall-clock ns of virtual time 0 (the link header's start_unix_ns).
    pub epoch_unix_ns: u64,
}

fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v.get(name).filter(|x| !x.is_null())
}

fn uint(v: &Value, name: &str, default: Option<u64>) -> Result<u64, Bad> {
    match field(v, name) {
        None => default.ok_or_else(|| {
            Bad::Input(format!(
                "config: \"{name}\" is missing (a non-negative integer)"
            ))
        }),
        Some(x) => x.as_u64().ok_or_else(|| {
            Bad::Input(format!(
                "config: \"{name}\" is {x}, not a non-negative integer"
            ))
        }),
    }
}

impl Config {
    pub fn parse(text: &str, run_dir: PathBuf) -> Result<Config, Bad> {
        let v: Value = serde_json::from_str(text).map_err(|e| {
            Bad::Input(format!(
                "config on stdin is not JSON ({e}); give one object, e.g. {{\"names\": [\"f\"]}}"
            ))
        })?;
        if !v.is_object() {
            return Err(Bad::Input("config on stdin must be a JSON object".into()));
        }
        for what in ["schedule.json", "www", "certs/cert.pem", "certs/priv.key"] {
            if !run_dir.join(what).exists() {
                return Err(Bad::Input(format!(
                    "{} is missing; RUN_DIR must be prepared by harness/virtual (schedule, objects, certificate)",
                    run_dir.join(what).display()
                )));
            }
        }
        let names: Vec<String> = match field(&v, "names").and_then(Value::as_array) {
            Some(a) if !a.is_empty() => a
                .iter()
                .map(|n| {
                    n.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| Bad::Input(format!("config: name {n} is not a string")))
                })
                .collect::<Result<_, _>>()?,
            _ => {
                return Err(Bad::Input(
                    "config: \"names\" must be a non-empty list of object names in www/".into(),
                ))
            }
        };
        for n in &names {
            if n.is_empty()
                || n.contains('/')
                || n == ".."
                || !run_dir.join("www").join(n).is_file()
            {
                return Err(Bad::Input(format!(
                    "config: object {n:?} is not a plain file name in {}/www",
                    run_dir.display()
                )));
            }
        }
        let testcase = match field(&v, "testcase")
            .and_then(Value::as_str)
            .unwrap_or("multiplexing")
        {
            "transfer" => Testcase::Transfer,
            "multiplexing" => Testcase::Multiplexing,
            "appidle" => Testcase::Appidle,
            other => {
                return Err(Bad::Unsupported(format!(
                    "testcase {other:?} (transfer, multiplexing or appidle)"
                )))
            }
        };
        let cc_name = field(&v, "cc")
            .and_then(Value::as_str)
            .unwrap_or(cc::DEFAULT)
            .to_ascii_lowercase();
        let cc = cc::lookup(&cc_name).ok_or_else(|| {
            Bad::Unsupported(format!(
                "{} has no cc {cc_name:?}; known: {}",
                crate::STACK,
                cc::names().join(", ")
            ))
        })?;
        let mds = uint(&v, "max_datagram_size", Some(1252))?;
        if !(1200..=65527).contains(&mds) {
            return Err(Bad::Unsupported(format!(
                "max_datagram_size {mds} is outside QUIC's 1200..=65527"
            )));
        }
        let initial_window = match field(&v, "initial_window") {
            None => None,
            Some(_) => Some(uint(&v, "initial_window", None)?).filter(|&w| w > 0),
        };
        let timeout_s = field(&v, "timeout_s")
            .map_or(Some(60.0), Value::as_f64)
            .filter(|t| *t > 0.0 && t.is_finite());
        let Some(timeout_s) = timeout_s else {
            return Err(Bad::Input(
                "config: \"timeout_s\" must be a positive number of (virtual) seconds".into(),
            ));
        };
        let flow_window = uint(&v, "flow_window", Some(64 << 20))?;
        if flow_window >= 1 << 62 {
            return Err(Bad::Unsupported(format!(
                "flow_window {flow_window} exceeds 2^62"
            )));
        }
        Ok(Config {
            run_dir,
            names,
            testcase,
            think_ns: uint(&v, "think_ms", Some(0))?.saturating_mul(1_000_000),
            cc,
            max_datagram_size: mds as u16,
            initial_window,
            flow_window,
            timeout_ns: (timeout_s * 1e9) as u64,
            seed: uint(&v, "seed", None)?,
            qlog: match field(&v, "qlog") {
                None => true,
                Some(q) => q.as_bool().ok_or_else(|| {
                    Bad::Input(format!("config: \"qlog\" is {q}; give true or false"))
                })?,
            },
            epoch_unix_ns: uint(&v, "epoch_unix_ns", None)?,
            clients: match uint(&v, "clients", Some(1))? {
                n @ 1..=64 => n as usize,
                n => {
                    return Err(Bad::Input(format!(
                        "config: \"clients\" is {n}; give 1 to 64 flows"
                    )))
                }
            },
        })
    }
}
