//! Property tests of the link core: random valid schedules (built as `Schedule`
//! structs, serialized to JSON and parsed back) × random packet sequences, through the
//! invariants shared with the fuzz targets (fuzz/checks.rs), plus determinism: two
//! links with the same schedule and arrivals give the same records and transmits.

#[path = "../fuzz/checks.rs"]
mod checks;

use checks::Arrival;
use longlook_link::schedule::{Action, ActionKind, FlowMatch, GilbertElliott, LinkSettings, Loss, Phase, Proto};
use longlook_link::{Dir, Schedule};
use proptest::prelude::*;

fn prob() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.0), Just(1.0), 0.0..=1.0]
}

fn loss() -> impl Strategy<Value = Option<Loss>> {
    prop_oneof![
        2 => Just(None),
        1 => prob().prop_map(|p| Some(Loss::Iid(p))),
        1 => (prob(), prob(), prob(), prob()).prop_map(|(a, b, c, d)| Some(Loss::GilbertElliott(GilbertElliott {
            p_good_bad: a,
            p_bad_good: b,
            loss_good: c,
            loss_bad: d,
        }))),
    ]
}

fn settings() -> impl Strategy<Value = LinkSettings> {
    let shape = (
        proptest::option::of(100_000u64..100_000_000),
        proptest::option::of(1u64..100_000),
        proptest::option::of(1u64..50),
        0u64..50_000,
        0u64..20_000,
        any::<bool>(),
    );
    let trace = proptest::option::of(proptest::collection::vec(0u64..20, 1..6));
    let impair = (trace, loss(), proptest::option::of(0u64..50_000), prob(), prob(), proptest::bool::weighted(0.05));
    (shape, impair).prop_map(|((rate, qb, qp, delay, jitter, reorders), (trace, loss, ecn, dup, corrupt, blackhole))| LinkSettings {
        rate_bps: rate,
        // A mahimahi trace (only without a rate), its text standing in for the path.
        trace: trace.filter(|_| rate.is_none()).map(|gaps| {
            let ms: Vec<u64> = gaps.iter().scan(0, |t, g| { *t += g; Some(*t) }).collect();
            let last = if ms.last() == Some(&0) { "\n1" } else { "" };
            format!("{}{last}", ms.iter().map(|m| m.to_string()).collect::<Vec<_>>().join("\n")).into()
        }),
        queue_bytes: qb,
        queue_packets: qp,
        delay_us: delay,
        jitter_us: jitter,
        jitter_reorders: reorders,
        loss,
        ecn_threshold_bytes: ecn,
        duplicate: dup / 4.0,
        corrupt: corrupt / 4.0,
        blackhole,
        ..Default::default()
    })
}

fn action() -> impl Strategy<Value = Action> {
    let kind = prop_oneof![
        Just(ActionKind::Drop),
        Just(ActionKind::Hold),
        Just(ActionKind::Delay),
        Just(ActionKind::Duplicate),
        Just(ActionKind::Corrupt),
        Just(ActionKind::Ce),
        Just(ActionKind::Outage),
    ];
    let port = proptest::option::of(prop_oneof![Just(443u16), Just(40000), Just(5201)]);
    let flow = proptest::option::of((proptest::option::of(any::<bool>()), port));
    (any::<bool>(), 0u64..20, flow, kind, 1u64..4, proptest::option::of(1u64..100_000), 0u64..100_000).prop_map(
        |(s2c, index, flow, kind, k, max_hold, extra)| Action {
            dir: if s2c { Dir::S2c } else { Dir::C2s },
            index,
            flow: flow.map(|(tcp, port)| FlowMatch { proto: tcp.map(|t| if t { Proto::Tcp } else { Proto::Udp }), port }),
            action: kind,
            k: (kind == ActionKind::Hold).then_some(k),
            max_hold_us: if kind == ActionKind::Hold { max_hold } else { None },
            extra_us: (kind == ActionKind::Delay).then_some(extra),
            duration_us: (kind == ActionKind::Outage).then_some(extra + 1),
        },
    )
}

fn schedule() -> impl Strategy<Value = Schedule> {
    let phases = proptest::collection::vec((settings(), settings(), 1u64..300_000), 1..4);
    (any::<u64>(), phases, proptest::collection::vec(action(), 0..5)).prop_map(|(seed, phases, actions)| {
        let mut start = 0;
        let phases = phases
            .into_iter()
            .enumerate()
            .map(|(i, (c2s, s2c, gap))| {
                start += if i == 0 { 0 } else { gap };
                Phase { start_us: start, c2s, s2c }
            })
            .collect();
        Schedule { seed, phases, actions }
    })
}

fn packet() -> impl Strategy<Value = Vec<u8>> {
    let port = prop_oneof![Just(443u16), Just(40000), Just(5201), any::<u16>()];
    prop_oneof![
        4 => (any::<bool>(), any::<bool>(), port.clone(), port, 0usize..1400, 0u8..4, any::<u32>())
            .prop_map(|(v6, tcp, sp, dp, len, ecn, seq)| checks::build(v6, tcp, sp, dp, len, ecn, seq)),
        1 => proptest::collection::vec(any::<u8>(), 0..64),
    ]
}

fn arrivals() -> impl Strategy<Value = Vec<Arrival>> {
    let gap = prop_oneof![Just(0u64), 0u64..2_000_000, 0u64..50_000_000];
    // Now and then the control socket forces a phase (possibly one that does not exist).
    let force = proptest::option::weighted(0.03, 0usize..4);
    proptest::collection::vec((gap, any::<bool>(), packet(), force), 0..40).prop_map(|v| {
        let mut t = 0;
        v.into_iter()
            .map(|(gap, s2c, bytes, force_phase)| {
                t += gap;
                Arrival { t_ns: t, dir: if s2c { Dir::S2c } else { Dir::C2s }, bytes, force_phase }
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 5000, ..ProptestConfig::default() })]

    #[test]
    fn schedules_round_trip_through_json(s in schedule()) {
        let json = serde_json::to_string(&s).unwrap();
        let parsed = Schedule::parse(&json, "prop.json").map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parsed, s);
    }

    #[test]
    fn link_keeps_its_invariants_and_is_deterministic(
        s in schedule(),
        arrivals in arrivals(),
        slice_ns in prop_oneof![Just(0u64), 1u64..2_000_000],
        drain in any::<bool>(),
    ) {
        let json = serde_json::to_string(&s).unwrap();
        let mut parsed = Schedule::parse(&json, "prop.json").map_err(|e| TestCaseError::fail(e.to_string()))?;
        checks::load_inline_traces(&mut parsed);
        // Runs two links from the same schedule, checks one and compares them.
        checks::check_link(&parsed, &arrivals, slice_ns, drain);
    }
}
