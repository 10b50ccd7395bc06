//! Every stage of the pipeline, driven through the sans-IO core in virtual time.

mod common;
use common::*;
use longlook_link::packet::{ipv4_header_checksum, parse};
use longlook_link::{Dir, DropReason, Fate, Link};

const MS: u64 = 1_000_000;

fn run(json: &str, arrivals: &[(u64, Dir, Vec<u8>)]) -> (Vec<(u64, longlook_link::Transmit)>, Vec<longlook_link::Record>) {
    let mut link = Link::new(schedule(json));
    drive(&mut link, arrivals)
}

#[test]
fn unimpaired_link_passes_everything_at_once() {
    let (out, recs) = run(r#"{"seed":1,"phases":[{"start_us":0}]}"#, &train(10, MS, Dir::C2s, numbered));
    assert_eq!(out.len(), 10);
    for (i, (t, tx)) in out.iter().enumerate() {
        assert_eq!(seq_of(&tx.bytes), i as u32);
        assert_eq!(*t, i as u64 * MS);
        assert_eq!(tx.dir, Dir::C2s);
    }
    assert!(recs.iter().all(|r| r.fate == Fate::Delivered && r.dep_ns == Some(r.arr_ns)));
}

#[test]
fn delay_shifts_departure_by_the_base_delay() {
    let (out, recs) = run(r#"{"seed":1,"phases":[{"start_us":0,"s2c":{"delay_us":20000}}]}"#, &train(5, MS, Dir::S2c, numbered));
    for (i, (_, tx)) in out.iter().enumerate() {
        assert_eq!(tx.due_ns, i as u64 * MS + 20 * MS);
    }
    assert!(recs.iter().all(|r| r.dep_ns.unwrap() - r.arr_ns == 20 * MS));
}

#[test]
fn rate_serialises_packets_back_to_back() {
    // 1200 bytes at 9.6 Mbit/s = 1 ms each.
    let (out, _) = run(r#"{"seed":1,"phases":[{"start_us":0,"c2s":{"rate_bps":9600000}}]}"#, &train(3, 0, Dir::C2s, numbered));
    let dues: Vec<u64> = out.iter().map(|(_, t)| t.due_ns).collect();
    assert_eq!(dues, vec![MS, 2 * MS, 3 * MS]);
}

#[test]
fn drop_tail_queue_drops_what_does_not_fit() {
    let json = r#"{"seed":1,"phases":[{"start_us":0,"c2s":{"rate_bps":9600000,"queue_packets":2}}]}"#;
    let (out, recs) = run(json, &train(4, 0, Dir::C2s, numbered));
    assert_eq!(out.len(), 2);
    let fates: Vec<Fate> = recs.iter().filter(|r| r.fate != Fate::Delivered).map(|r| r.fate).collect();
    assert_eq!(fates, vec![Fate::Dropped(DropReason::QueueFull); 2]);
    let byte_json = r#"{"seed":1,"phases":[{"start_us":0,"c2s":{"rate_bps":9600000,"queue_bytes":3000}}]}"#;
    let (out, recs) = run(byte_json, &train(4, 0, Dir::C2s, numbered));
    assert_eq!(out.len(), 2);
    assert_eq!(recs.iter().find(|r| r.idx == 2).unwrap().qbytes, 2400);
}

#[test]
fn default_queue_is_bounded_when_a_rate_is_set() {
    let (out, _) = run(r#"{"seed":1,"phases":[{"start_us":0,"c2s":{"rate_bps":1000000}}]}"#, &train(1500, 0, Dir::C2s, numbered));
    assert_eq!(out.len(), 1000);
}

#[test]
fn iid_loss_drops_about_p_and_is_deterministic() {
    let json = r#"{"seed":42,"phases":[{"start_us":0,"c2s":{"loss":{"iid":0.1}}}]}"#;
    let arrivals = train(20000, 1000, Dir::C2s, numbered);
    let (_, a) = run(json, &arrivals);
    let (_, b) = run(json, &arrivals);
    assert_eq!(a, b, "same schedule and arrivals must give the same records");
    let lost = a.iter().filter(|r| r.fate == Fate::Dropped(DropReason::LossIid)).count();
    assert!((1800..2200).contains(&lost), "lost {lost} of 20000 at p=0.1");
    let (_, c) = run(&json.replace("42", "43"), &arrivals);
    assert_ne!(a, c, "another seed must give other fates");
}

#[test]
fn loss_pattern_does_not_depend_on_other_impairments() {
    let arrivals = train(2000, 1000, Dir::C2s, numbered);
    let plain = r#"{"seed":5,"phases":[{"start_us":0,"c2s":{"loss":{"iid":0.05}}}]}"#;
    let jittered = r#"{"seed":5,"phases":[{"start_us":0,"c2s":{"loss":{"iid":0.05},"jitter_us":500,"delay_us":1000}}]}"#;
    let lost = |recs: Vec<longlook_link::Record>| -> Vec<u64> {
        recs.iter().filter(|r| matches!(r.fate, Fate::Dropped(_))).map(|r| r.idx).collect()
    };
    assert_eq!(lost(run(plain, &arrivals).1), lost(run(jittered, &arrivals).1));
}

#[test]
fn gilbert_elliott_losses_come_in_bursts() {
    let json = r#"{"seed":3,"phases":[{"start_us":0,"c2s":{"loss":{"gilbert_elliott":{"p_good_bad":0.01,"p_bad_good":0.2}}}}]}"#;
    let (_, recs) = run(json, &train(20000, 1000, Dir::C2s, numbered));
    let lost: Vec<bool> = recs.iter().map(|r| r.fate == Fate::Dropped(DropReason::LossGe)).collect();
    let n = lost.iter().filter(|&&l| l).count();
    let runs = lost.windows(2).filter(|w| w[1] && !w[0]).count();
    // Mean burst length 1/p_bad_good = 5; stationary loss 0.01/0.21 ≈ 4.8 %.
    assert!((600..1400).contains(&n), "lost {n}");
    let mean_burst = n as f64 / runs as f64;
    assert!(mean_burst > 3.0, "mean burst {mean_burst}");
    let none = r#"{"seed":3,"phases":[{"start_us":0,"c2s":{"loss":{"gilbert_elliott":{"p_good_bad":0,"p_bad_good":1}}}}]}"#;
    assert!(run(none, &train(1000, 1000, Dir::C2s, numbered)).1.iter().all(|r| r.fate == Fate::Delivered));
}

#[test]
fn index_drop_by_direction_and_by_flow() {
    // Interleave a TCP packet before every UDP one: the flow index is unaffected.
    let mut arrivals = Vec::new();
    for i in 0..20usize {
        arrivals.push((i as u64 * 2 * MS, Dir::C2s, tcp(5201, 33000, 100)));
        arrivals.push((i as u64 * 2 * MS + MS, Dir::C2s, numbered(i)));
    }
    let json = r#"{"seed":1,"phases":[{"start_us":0}],"actions":[
        {"dir":"c2s","index":3,"action":"drop"},
        {"dir":"c2s","flow":{"proto":"udp","port":443},"index":7,"action":"drop"}]}"#;
    let (out, recs) = run(json, &arrivals);
    let dropped: Vec<(u64, u64, &str)> = recs
        .iter()
        .filter(|r| r.fate == Fate::Dropped(DropReason::LossIndex))
        .map(|r| (r.idx, r.fidx, r.proto))
        .collect();
    assert_eq!(dropped, vec![(3, 1, "udp"), (15, 7, "udp")]);
    let udp_seen: Vec<u32> = out.iter().filter(|(_, t)| parse(&t.bytes).unwrap().proto == 17).map(|(_, t)| seq_of(&t.bytes)).collect();
    assert!(!udp_seen.contains(&1) && !udp_seen.contains(&7) && udp_seen.len() == 18);
}

#[test]
fn hold_releases_a_packet_right_after_the_next_k() {
    let json = r#"{"seed":1,"phases":[{"start_us":0,"c2s":{"delay_us":5000}}],"actions":[{"dir":"c2s","index":10,"action":"hold","k":3}]}"#;
    let (out, recs) = run(json, &train(20, MS, Dir::C2s, numbered));
    let order: Vec<u32> = out.iter().map(|(_, t)| seq_of(&t.bytes)).collect();
    assert_eq!(&order[9..14], &[9, 11, 12, 13, 10]);
    let held = recs.iter().find(|r| r.idx == 10).unwrap();
    assert_eq!(held.marks & longlook_link::record::marks::HELD, longlook_link::record::marks::HELD);
    assert_eq!(held.dep_ns, Some(13 * MS + 5 * MS));
}

#[test]
fn hold_counts_only_its_own_flow_and_is_bounded() {
    let mut arrivals = Vec::new();
    for i in 0..6usize {
        arrivals.push((i as u64 * 2 * MS, Dir::C2s, numbered(i)));
        arrivals.push((i as u64 * 2 * MS + MS, Dir::C2s, tcp(5201, 33000, 100)));
    }
    let json = r#"{"seed":1,"phases":[{"start_us":0}],"actions":[{"dir":"c2s","flow":{"proto":"udp"},"index":1,"action":"hold","k":3}]}"#;
    let (out, _) = run(json, &arrivals);
    let udp: Vec<u32> = out.iter().filter(|(_, t)| parse(&t.bytes).unwrap().proto == 17).map(|(_, t)| seq_of(&t.bytes)).collect();
    assert_eq!(udp, vec![0, 2, 3, 4, 1, 5]);
    // Nothing follows: the bound releases it.
    let json = r#"{"seed":1,"phases":[{"start_us":0}],"actions":[{"dir":"c2s","index":1,"action":"hold","k":5,"max_hold_us":7000}]}"#;
    let (out, _) = run(json, &train(2, MS, Dir::C2s, numbered));
    assert_eq!(out.len(), 2);
    assert_eq!(out[1].1.due_ns, MS + 7 * MS);
}

#[test]
fn extra_delay_reorders_one_packet() {
    let json = r#"{"seed":1,"phases":[{"start_us":0}],"actions":[{"dir":"s2c","index":2,"action":"delay","extra_us":2500}]}"#;
    let (out, _) = run(json, &train(6, MS, Dir::S2c, numbered));
    let order: Vec<u32> = out.iter().map(|(_, t)| seq_of(&t.bytes)).collect();
    assert_eq!(order, vec![0, 1, 3, 4, 2, 5]);
}

#[test]
fn jitter_keeps_order_unless_allowed_to_reorder() {
    let arrivals = train(2000, 100_000, Dir::C2s, numbered);
    let keep = r#"{"seed":9,"phases":[{"start_us":0,"c2s":{"delay_us":10000,"jitter_us":2000}}]}"#;
    let (out, _) = run(keep, &arrivals);
    let order: Vec<u32> = out.iter().map(|(_, t)| seq_of(&t.bytes)).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]));
    let delays: Vec<u64> = out.iter().enumerate().map(|(i, (_, t))| t.due_ns - i as u64 * 100_000).collect();
    assert!(delays.iter().all(|&d| (10 * MS..=12 * MS + 1).contains(&d)), "delay outside [10, 12] ms");
    let (out, recs) = run(&keep.replace("\"jitter_us\":2000", "\"jitter_us\":2000,\"jitter_reorders\":true"), &arrivals);
    let order: Vec<u32> = out.iter().map(|(_, t)| seq_of(&t.bytes)).collect();
    let inversions = order.windows(2).filter(|w| w[0] > w[1]).count();
    assert!(inversions > 100, "only {inversions} inversions");
    assert!(recs.iter().any(|r| r.marks & longlook_link::record::marks::REORDERED_BY_JITTER != 0));
}

#[test]
fn duplication_adds_one_copy_with_its_own_record() {
    let json = r#"{"seed":1,"phases":[{"start_us":0}],"actions":[{"dir":"c2s","index":1,"action":"duplicate"}]}"#;
    let (out, recs) = run(json, &train(3, MS, Dir::C2s, numbered));
    let order: Vec<u32> = out.iter().map(|(_, t)| seq_of(&t.bytes)).collect();
    assert_eq!(order, vec![0, 1, 1, 2]);
    assert_eq!(recs.iter().filter(|r| r.fate == Fate::Duplicate).map(|r| r.idx).collect::<Vec<_>>(), vec![1]);
    let json = r#"{"seed":1,"phases":[{"start_us":0,"c2s":{"duplicate":0.5}}]}"#;
    let (out, _) = run(json, &train(2000, MS, Dir::C2s, numbered));
    assert!((2800..3200).contains(&out.len()), "{} transmits", out.len());
}

#[test]
fn corruption_flips_exactly_one_payload_bit() {
    let json = r#"{"seed":1,"phases":[{"start_us":0}],"actions":[{"dir":"c2s","index":0,"action":"corrupt"}]}"#;
    let (out, recs) = run(json, &train(1, 0, Dir::C2s, numbered));
    let orig = numbered(0);
    let diff: u32 = orig.iter().zip(&out[0].1.bytes).map(|(a, b)| (a ^ b).count_ones()).sum();
    assert_eq!(diff, 1);
    let at = orig.iter().zip(&out[0].1.bytes).position(|(a, b)| a != b).unwrap();
    assert!(at >= 28, "flipped byte {at} is in a header");
    assert_ne!(recs[0].marks & longlook_link::record::marks::CORRUPT, 0);
}

#[test]
fn ecn_marks_ect_packets_above_the_threshold_with_a_valid_checksum() {
    let json = r#"{"seed":1,"phases":[{"start_us":0,"c2s":{"rate_bps":9600000,"ecn_threshold_bytes":2400}}]}"#;
    let arrivals: Vec<_> = (0..4).map(|i| (0, Dir::C2s, udp(1, 2, 1200, if i == 3 { 0 } else { 2 }))).collect();
    let (out, recs) = run(json, &arrivals);
    let ecn: Vec<u8> = out.iter().map(|(_, t)| t.bytes[1] & 3).collect();
    assert_eq!(ecn, vec![2, 2, 3, 0], "third ECT packet marked; not-ECT untouched");
    for (_, t) in &out {
        assert_eq!(u16::from_be_bytes([t.bytes[10], t.bytes[11]]), ipv4_header_checksum(&t.bytes[..20]));
    }
    assert_eq!(recs.iter().filter(|r| r.marks & longlook_link::record::marks::CE != 0).count(), 1);
    let by_index = r#"{"seed":1,"phases":[{"start_us":0}],"actions":[{"dir":"c2s","index":0,"action":"ce"}]}"#;
    let (out, _) = run(by_index, &[(0, Dir::C2s, udp(1, 2, 100, 1))]);
    assert_eq!(out[0].1.bytes[1] & 3, 3);
}

#[test]
fn phases_change_settings_over_time_including_blackholes() {
    let json = r#"{"seed":1,"phases":[{"start_us":0},{"start_us":5000,"c2s":{"blackhole":true}},{"start_us":8000,"c2s":{"delay_us":1000}}]}"#;
    let (out, recs) = run(json, &train(10, MS, Dir::C2s, numbered));
    let seen: Vec<u32> = out.iter().map(|(_, t)| seq_of(&t.bytes)).collect();
    assert_eq!(seen, vec![0, 1, 2, 3, 4, 8, 9]);
    assert_eq!(recs.iter().filter(|r| r.fate == Fate::Dropped(DropReason::Blackhole)).count(), 3);
    assert_eq!(out[5].1.due_ns, 9 * MS);
}

#[test]
fn an_outage_darkens_its_direction_from_its_packet_for_its_duration() {
    // c2s packets every ms, TCP ones in between: the outage starts at the 4th UDP
    // packet (t = 7 ms) and lasts 3.5 ms, so every packet of the direction arriving in
    // [7, 10.5) ms is dropped whatever its flow, and the other direction is untouched.
    let mut arrivals = Vec::new();
    for i in 0..10usize {
        arrivals.push((i as u64 * 2 * MS, Dir::C2s, tcp(5201, 33000, 100)));
        arrivals.push((i as u64 * 2 * MS + MS, Dir::C2s, numbered(i)));
        arrivals.push((i as u64 * 2 * MS + MS, Dir::S2c, numbered(100 + i)));
    }
    let json = r#"{"seed":1,"phases":[{"start_us":0}],"actions":[
        {"dir":"c2s","flow":{"proto":"udp"},"index":3,"action":"outage","duration_us":3500}]}"#;
    let (_, recs) = run(json, &arrivals);
    let dark: Vec<(u64, &str)> = recs
        .iter()
        .filter(|r| r.fate == Fate::Dropped(DropReason::Blackhole))
        .map(|r| (r.arr_ns / MS, r.proto))
        .collect();
    assert_eq!(dark, vec![(7, "udp"), (8, "tcp"), (9, "udp"), (10, "tcp")]);
    assert!(recs.iter().filter(|r| r.dir == Dir::S2c).all(|r| r.fate == Fate::Delivered));
}

#[test]
fn an_outage_without_a_duration_names_the_field() {
    let json = r#"{"seed":1,"phases":[{"start_us":0}],"actions":[{"dir":"c2s","index":3,"action":"outage"}]}"#;
    let err = longlook_link::Schedule::parse(json, "test.json").unwrap_err().to_string();
    assert!(err.contains("duration_us") && err.contains("outage"), "{err}");
}

#[test]
fn a_rate_drop_slows_the_queue() {
    let json = r#"{"seed":1,"phases":[{"start_us":0,"c2s":{"rate_bps":9600000}},{"start_us":10000,"c2s":{"rate_bps":960000}}]}"#;
    let (out, _) = run(json, &train(20, MS, Dir::C2s, numbered));
    let last = out.last().unwrap().1.due_ns;
    // 10 packets before 10 ms at 1 ms each, then 10 at 10 ms each.
    assert_eq!(last, 10 * MS + 10 * 10 * MS);
}

#[test]
fn forced_phase_applies_from_now_until_the_next_timed_phase() {
    let mut link = Link::new(schedule(r#"{"seed":1,"phases":[{"start_us":0},{"start_us":10000,"c2s":{"blackhole":true}},{"start_us":20000}]}"#));
    assert_eq!(link.phase_at(3 * MS), 0);
    link.force_phase(4 * MS, 1).unwrap();
    assert_eq!(link.phase_at(3 * MS), 0);
    assert_eq!(link.phase_at(5 * MS), 1);
    assert_eq!(link.phase_at(25 * MS), 2);
    assert!(link.force_phase(5 * MS, 7).is_err());
}

#[test]
fn trace_mode_follows_delivery_opportunities() {
    let mut s = schedule(r#"{"seed":1,"phases":[{"start_us":0,"c2s":{"trace":"t.trace"}}]}"#);
    s.phases[0].c2s.trace_ms = longlook_link::schedule::parse_trace("2\n2\n10\n").unwrap();
    let mut link = Link::new(s);
    // Three 1500-byte packets at t=0: two opportunities at 2 ms, one at 10 ms.
    let arrivals: Vec<_> = (0..4).map(|_| (0, Dir::C2s, udp(1, 2, 1500, 0))).collect();
    let (out, _) = drive(&mut link, &arrivals);
    let dues: Vec<u64> = out.iter().map(|(_, t)| t.due_ns).collect();
    assert_eq!(dues, vec![2 * MS, 2 * MS, 10 * MS, 12 * MS]);
}

#[test]
fn malformed_and_truncated_packets_are_dropped_not_fatal() {
    let mut truncated = numbered(0);
    truncated.truncate(23);
    let arrivals = vec![(0, Dir::C2s, vec![]), (1, Dir::C2s, vec![0x60, 0, 0]), (2, Dir::C2s, truncated), (3, Dir::C2s, numbered(1))];
    let (out, recs) = run(r#"{"seed":1,"phases":[{"start_us":0}]}"#, &arrivals);
    assert_eq!(recs.iter().filter(|r| r.fate == Fate::Dropped(DropReason::Malformed)).count(), 2);
    assert_eq!(out.len(), 2, "a truncated but parseable IP header still travels");
}

#[test]
fn shutdown_logs_what_is_still_inside_as_in_flight() {
    let mut link = Link::new(schedule(r#"{"seed":1,"phases":[{"start_us":0,"c2s":{"delay_us":50000,"rate_bps":9600000}}]}"#));
    for i in 0..5 {
        link.on_packet(0, Dir::C2s, &numbered(i));
    }
    link.shutdown();
    let mut recs = Vec::new();
    while let Some(r) = link.poll_record() {
        recs.push(r);
    }
    assert_eq!(recs.iter().map(|r| (r.idx, r.fate)).collect::<Vec<_>>(), (0..5).map(|i| (i, Fate::InFlight)).collect::<Vec<_>>());
    assert_eq!(link.next_deadline(), None);
}

#[test]
fn record_json_is_one_parseable_line() {
    let (_, recs) = run(r#"{"seed":1,"phases":[{"start_us":0,"c2s":{"delay_us":1500}}]}"#, &[(1234, Dir::C2s, numbered(0))]);
    let mut buf = Vec::new();
    recs[0].write_json(&mut buf).unwrap();
    let text = String::from_utf8(buf).unwrap();
    assert_eq!(text.matches('\n').count(), 1);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["arr_us"], serde_json::json!(1.234));
    assert_eq!(v["dep_us"], serde_json::json!(1501.234));
    assert_eq!(v["flow"], "udp 198.18.0.1:40000>198.19.0.1:443");
    assert_eq!(v["fate"], "delivered");
}

#[test]
fn a_released_hold_leaves_right_after_the_kth_even_in_a_burst() {
    // All packets due at the same instant: 10 must still leave right after 13.
    let json = r#"{"seed":1,"phases":[{"start_us":0}],"actions":[{"dir":"c2s","index":10,"action":"hold","k":3},{"dir":"c2s","index":10,"action":"duplicate"}]}"#;
    let mut link = Link::new(schedule(json));
    for i in 0..20 {
        link.on_packet(0, Dir::C2s, &numbered(i));
    }
    let mut order = Vec::new();
    while let Some(t) = link.poll_transmit(1_000) {
        order.push(seq_of(&t.bytes));
    }
    assert_eq!(&order[9..16], &[9, 11, 12, 13, 10, 10, 14]);
}
