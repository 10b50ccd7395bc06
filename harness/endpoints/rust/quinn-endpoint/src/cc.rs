//! The congestion controllers this endpoint can run, selected by LL_CC.
//!
//! `REGISTRY` is the one table of them. Each entry names the controller, states its
//! family and multiplicative decrease β (what the properties check it against),
//! and builds its quinn `ControllerFactory` for an optional initial window.
//!
//! To add a controller (e.g. a test mutant that must be caught by the suite):
//! 1. implement `quinn_proto::congestion::{Controller, ControllerFactory}` in a new
//!    module beside this one (wrapping a stock controller is usually enough);
//! 2. append an `Entry` to `REGISTRY` with a unique name (mutants: `mutant-…`);
//! 3. list it in `harness/endpoints/quinn/caps.json` under "cc" if the harness
//!    should offer it as a conformant choice, or under "mutants" (selectable with
//!    `--cc mutant-…`, never offered; tests/mutants/catalogue.py runs them).

use std::sync::Arc;

use quinn_proto::congestion::{BbrConfig, ControllerFactory, CubicConfig, NewRenoConfig};

use crate::mutants::{Bug, MutantFactory};

/// A controller factory as quinn's TransportConfig takes it.
pub type Factory = Arc<dyn ControllerFactory + Send + Sync + 'static>;

pub struct Entry {
    /// The LL_CC value that selects it.
    pub name: &'static str,
    /// "newreno", "cubic" or "bbr": which RFC 9002 rules apply.
    pub family: &'static str,
    /// Multiplicative decrease on loss; None for BBR (model-based, no β).
    pub beta: Option<f64>,
    /// Builds the factory; `initial_window` is in bytes (None: quinn's default).
    pub build: fn(initial_window: Option<u64>) -> Factory,
}

pub const REGISTRY: &[Entry] = &[
    Entry {
        name: "newreno",
        family: "newreno",
        beta: Some(0.5),
        build: newreno,
    },
    Entry {
        name: "cubic",
        family: "cubic",
        beta: Some(0.7),
        build: cubic,
    },
    Entry {
        name: "bbr",
        family: "bbr",
        beta: None,
        build: bbr,
    },
    // The mutant zoo (tests/mutants/README.md): NewReno with one bug each. Family
    // and β are what they claim to be, so the properties judge them as NewReno.
    Entry {
        name: "mutant-beta-0.9",
        family: "newreno",
        beta: Some(0.5),
        build: mutant_beta_0_9,
    },
    Entry {
        name: "mutant-reduce-every-loss",
        family: "newreno",
        beta: Some(0.5),
        build: mutant_reduce_every_loss,
    },
    Entry {
        name: "mutant-persistent-congestion-ignored",
        family: "newreno",
        beta: Some(0.5),
        build: mutant_persistent_congestion_ignored,
    },
    Entry {
        name: "mutant-app-limited-growth",
        family: "newreno",
        beta: Some(0.5),
        build: mutant_app_limited_growth,
    },
];

/// quinn's own default (TransportConfig::default uses CubicConfig).
pub const DEFAULT: &str = "cubic";

/// Other spellings the harness may pass (its stacks.json normalises reno→newreno).
const ALIASES: &[(&str, &str)] = &[("reno", "newreno")];

pub fn lookup(name: &str) -> Option<&'static Entry> {
    let name = ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, real)| real);
    REGISTRY.iter().find(|e| e.name == name)
}

pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|e| e.name).collect()
}

fn newreno(initial_window: Option<u64>) -> Factory {
    Arc::new(newreno_config(initial_window))
}

fn cubic(initial_window: Option<u64>) -> Factory {
    let mut config = CubicConfig::default();
    if let Some(w) = initial_window {
        config.initial_window(w);
    }
    Arc::new(config)
}

fn bbr(initial_window: Option<u64>) -> Factory {
    let mut config = BbrConfig::default();
    if let Some(w) = initial_window {
        config.initial_window(w);
    }
    Arc::new(config)
}

fn newreno_config(initial_window: Option<u64>) -> NewRenoConfig {
    let mut config = NewRenoConfig::default();
    if let Some(w) = initial_window {
        config.initial_window(w);
    }
    config
}

/// A loss reduction factor of 0.9 instead of 0.5: a configuration bug that the
/// stock code carries out faithfully (cf. finding F1, quic-go's 0.7).
fn mutant_beta_0_9(initial_window: Option<u64>) -> Factory {
    let mut config = newreno_config(initial_window);
    config.loss_reduction_factor(0.9);
    Arc::new(config)
}

fn mutant_reduce_every_loss(initial_window: Option<u64>) -> Factory {
    mutant(initial_window, Bug::ReduceEveryLoss)
}

fn mutant_persistent_congestion_ignored(initial_window: Option<u64>) -> Factory {
    mutant(initial_window, Bug::IgnorePersistentCongestion)
}

fn mutant_app_limited_growth(initial_window: Option<u64>) -> Factory {
    mutant(initial_window, Bug::GrowWhileAppLimited)
}

fn mutant(initial_window: Option<u64>, bug: Bug) -> Factory {
    Arc::new(MutantFactory { inner: Arc::new(newreno_config(initial_window)), bug })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for e in REGISTRY {
            assert_eq!(
                REGISTRY.iter().filter(|o| o.name == e.name).count(),
                1,
                "{}",
                e.name
            );
            assert!(lookup(e.name).is_some());
        }
        assert_eq!(lookup("reno").unwrap().name, "newreno");
        assert!(lookup(DEFAULT).is_some());
    }

    /// caps.json must offer only controllers the registry has.
    #[test]
    fn caps_json_matches_registry() {
        let caps = include_str!("../../../quinn/caps.json");
        let caps: serde_json::Value = serde_json::from_str(caps).unwrap();
        for (name, cc) in caps["cc"].as_object().unwrap() {
            let entry = lookup(name).unwrap_or_else(|| panic!("caps.json names unknown cc {name}"));
            assert_eq!(cc["family"], entry.family);
            assert_eq!(cc["beta"].as_f64(), entry.beta);
        }
    }

    /// Mutants are listed apart in caps.json, and every `mutant-` entry is there.
    #[test]
    fn caps_json_lists_every_mutant_apart() {
        let caps: serde_json::Value = serde_json::from_str(include_str!("../../../quinn/caps.json")).unwrap();
        let listed = caps["mutants"].as_object().unwrap();
        for e in REGISTRY.iter().filter(|e| e.name.starts_with("mutant-")) {
            assert!(caps["cc"].get(e.name).is_none(), "{} offered as conformant", e.name);
            let m = listed.get(e.name).unwrap_or_else(|| panic!("{} missing from caps.json mutants", e.name));
            assert_eq!(m["family"], e.family);
            assert_eq!(m["beta"].as_f64(), e.beta);
        }
        assert_eq!(listed.len(), REGISTRY.iter().filter(|e| e.name.starts_with("mutant-")).count());
    }
}
