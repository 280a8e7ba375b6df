//! The plan's bounds: what a request costs, one order in flight per stream, stalled clients,
//! leased blocks, per-uid shares, escaped text.
use super::*;

/// Registers `n` streams of priority 0 for each of `clients` clients (ids from 1).
fn crowd(p: &mut Plan, clients: u64, n: u64, t: Instant) {
    let mut out = Vec::new();
    for c in 1..=clients {
        p.join(c, "lp", 1000 + u32::try_from(c).unwrap());
        for s in 0..n {
            register(p, c, s, s, 0, D, t, &mut out);
        }
    }
}

#[test]
fn a_request_costs_what_it_changes_not_every_stream_on_the_node() {
    let (mut p, t) = plan();
    crowd(&mut p, 16, 1024, t);
    p.join(100, "hp", 1000);
    p.join(101, "newcomer", 1000);
    let mut out = Vec::new();
    // One more registration with 16,384 streams on the node: a handful of queues examined.
    let w = p.work();
    register(&mut p, 101, 1, 1, 5, D, t, &mut out);
    assert!(p.work() - w <= 2, "{} examined", p.work() - w);
    // A block that outranks nothing (priority 0: nobody is below it) examines nothing more.
    let w = p.work();
    p.request(100, 2, Request::Enter { priority: 0, device: D }, t, &mut out)
        .unwrap();
    p.request(100, 3, Request::Leave { priority: 0, device: D }, t, &mut out)
        .unwrap();
    assert_eq!(p.work() - w, 0);
    assert!(orders(&out).is_empty());
    // Pings, status and an ack: nothing.
    let w = p.work();
    p.request(101, 4, Request::Ping {}, t, &mut out).unwrap();
    p.request(101, 5, Request::Status {}, t, &mut out).unwrap();
    assert_eq!(p.work() - w, 0);
}

#[test]
fn a_flood_of_blocks_sends_each_stream_one_order_until_it_is_acknowledged() {
    let (mut p, t) = plan();
    crowd(&mut p, 1, 1024, t);
    p.join(2, "flood", 1000);
    let mut out = Vec::new();
    for i in 0..50 {
        p.request(2, 2 * i, Request::Enter { priority: 1, device: D }, t, &mut out)
            .unwrap();
        p.request(2, 2 * i + 1, Request::Leave { priority: 1, device: D }, t, &mut out)
            .unwrap();
    }
    let o = orders(&out);
    assert_eq!(
        o.len(),
        1024,
        "one suspend per stream, nothing more while unacknowledged"
    );
    assert!(o.iter().all(|x| x.2 == Suspend));
    // The acks come: each stream's state is compared with the plan (no block now): one resume.
    let mut out = Vec::new();
    for x in &o {
        out.extend(ack(&mut p, 1, x.3, true, t));
    }
    let r = orders(&out);
    assert_eq!(r.len(), 1024);
    assert!(r.iter().all(|x| x.2 == Resume));
    let mut out = Vec::new();
    for x in &r {
        out.extend(ack(&mut p, 1, x.3, true, t));
    }
    assert!(orders(&out).is_empty(), "settled");
}

#[test]
fn a_stalled_client_is_waited_for_once_then_not_until_it_acknowledges() {
    let (mut p, t) = plan();
    let mut out = Vec::new();
    p.join(1, "stopped-lp", 1000);
    p.join(2, "lp", 1000);
    p.join(3, "hp", 1000);
    register(&mut p, 1, 1, 1, 0, D, t, &mut out);
    register(&mut p, 2, 1, 1, 0, D, t, &mut out);
    out.clear();
    p.request(3, 1, Request::Enter { priority: 1, device: D }, t, &mut out)
        .unwrap();
    let o = orders(&out);
    let late_order = o.iter().find(|x| x.0 == 1).unwrap().3;
    out = ack(&mut p, 2, o.iter().find(|x| x.0 == 2).unwrap().3, true, t);
    assert!(sent_to(&out, 3).is_empty(), "still waiting for client 1");
    let mut out = Vec::new();
    p.tick(t + ACK, &mut out);
    assert_eq!(
        sent_to(&out, 3),
        vec![Entered {
            re: 1,
            suspended: 1,
            failed: 0,
            late: 1
        }]
    );
    assert!(
        out.iter()
            .any(|o| matches!(o, Out::ClientLog(_, l) if l.contains("stalled")))
    );
    // The block leaves: client 2 is ordered to resume; client 1 gets no second order while its
    // suspend is in flight.
    let mut out = Vec::new();
    p.request(3, 2, Request::Leave { priority: 1, device: D }, t + ACK, &mut out)
        .unwrap();
    let r = orders(&out);
    assert_eq!(r.iter().map(|x| (x.0, x.2)).collect::<Vec<_>>(), vec![(2, Resume)]);
    ack(&mut p, 2, r[0].3, true, t + ACK);
    // The next block does not wait for the stalled client: it replies once client 2 acks.
    let mut out = Vec::new();
    p.request(3, 3, Request::Enter { priority: 1, device: D }, t + ACK, &mut out)
        .unwrap();
    let s2 = orders(&out);
    assert_eq!(s2.iter().map(|x| (x.0, x.2)).collect::<Vec<_>>(), vec![(2, Suspend)]);
    let out = ack(&mut p, 2, s2[0].3, true, t + ACK);
    assert_eq!(
        sent_to(&out, 3),
        vec![Entered {
            re: 3,
            suspended: 1,
            failed: 0,
            late: 0
        }]
    );
    // Client 1 wakes up and acknowledges its suspend, which the plan still wants: no new order,
    // and its streams are waited for again.
    let out = ack(&mut p, 1, late_order, true, t + ACK * 2);
    assert!(orders(&out).is_empty());
    assert!(
        out.iter()
            .any(|o| matches!(o, Out::ClientLog(_, l) if l.contains("waited for again")))
    );
}

#[test]
fn a_block_held_too_long_or_by_a_silent_client_ends_and_its_leave_is_done() {
    let limits = Limits {
        max_block: Duration::from_secs(10),
        block_silence: Duration::from_secs(1),
        ..Limits::default()
    };
    let mut p = Plan::new(ACK, limits);
    let t = Instant::now();
    let mut out = Vec::new();
    p.join(1, "lp", 1000);
    p.join(2, "hp", 1000);
    register(&mut p, 1, 1, 1, 0, D, t, &mut out);
    p.request(2, 1, Request::Enter { priority: 1, device: D }, t, &mut out)
        .unwrap();
    let o = orders(&out)[0].3;
    ack(&mut p, 1, o, true, t);
    // The HP client pings (heard) for 9 s, then its block reaches 10 s and ends.
    for s in 1..10 {
        p.heard(2, t + Duration::from_secs(s));
        let mut out = Vec::new();
        p.tick(t + Duration::from_secs(s), &mut out);
        assert!(orders(&out).is_empty(), "at {s} s");
    }
    let mut out = Vec::new();
    p.heard(2, t + Duration::from_secs(10));
    p.tick(t + Duration::from_secs(10), &mut out);
    assert_eq!(
        orders(&out).iter().map(|x| (x.0, x.2)).collect::<Vec<_>>(),
        vec![(1, Resume)]
    );
    assert!(
        out.iter()
            .any(|o| matches!(o, Out::ClientLog(_, l) if l.contains("active for more than 10000 ms")))
    );
    let r = orders(&out)[0].3;
    ack(&mut p, 1, r, true, t + Duration::from_secs(10));
    let mut out = Vec::new();
    p.request(
        2,
        2,
        Request::Leave { priority: 1, device: D },
        t + Duration::from_secs(11),
        &mut out,
    )
    .unwrap();
    assert_eq!(
        sent_to(&out, 2),
        vec![Done { re: 2 }],
        "its leave of the ended block is done"
    );
    assert_eq!(
        p.request(2, 3, Request::Leave { priority: 1, device: D }, t, &mut out)
            .unwrap_err()
            .code,
        Code::NotActive
    );
    // A client that goes silent inside a block: after 1 s its blocks end.
    let t2 = t + Duration::from_secs(20);
    let mut out = Vec::new();
    p.request(2, 4, Request::Enter { priority: 1, device: D }, t2, &mut out)
        .unwrap();
    p.request(2, 5, Request::Enter { priority: 1, device: D }, t2, &mut out)
        .unwrap();
    ack(&mut p, 1, orders(&out)[0].3, true, t2);
    let mut out = Vec::new();
    p.tick(t2 + Duration::from_millis(999), &mut out);
    assert!(orders(&out).is_empty());
    p.tick(t2 + Duration::from_secs(1), &mut out);
    assert_eq!(
        orders(&out).iter().map(|x| (x.0, x.2)).collect::<Vec<_>>(),
        vec![(1, Resume)]
    );
    assert!(out.iter().any(
        |o| matches!(o, Out::ClientLog(_, l) if l.contains("silent for more than 1000 ms while holding 2 blocks"))
    ));
    assert_eq!(
        p.next_deadline(),
        Some(t2 + Duration::from_secs(1) + ACK),
        "the resume's ack"
    );
}

#[test]
fn client_text_is_escaped_in_the_log() {
    let (mut p, t) = plan();
    let mut out = Vec::new();
    p.join(1, "lp\u{202e}\ninjected", 1000);
    register(&mut p, 1, 1, 1, 0, D, t, &mut out);
    p.request(1, 2, Request::Enter { priority: 1, device: D }, t, &mut out)
        .unwrap();
    let o = orders(&out)[0].3;
    let mut out = Vec::new();
    p.request(
        1,
        3,
        Request::Ack {
            order: o,
            ok: false,
            error: Some("bad\nclient 7 connected".into()),
        },
        t,
        &mut out,
    )
    .unwrap();
    let logs: Vec<&String> = out
        .iter()
        .filter_map(|o| match o {
            Out::ClientLog(_, l) => Some(l),
            Out::Send(..) => None,
        })
        .collect();
    assert_eq!(logs.len(), 1);
    assert!(!logs[0].contains('\n') && !logs[0].contains('\u{202e}'), "{}", logs[0]);
    assert!(
        logs[0].contains("lp\\u{202e}\\u{a}injected") && logs[0].contains("bad\\u{a}client 7"),
        "{}",
        logs[0]
    );
}

#[test]
fn one_uid_registers_at_most_its_share_of_streams() {
    let limits = Limits {
        streams_per_uid: 3,
        ..Limits::default()
    };
    let mut p = Plan::new(ACK, limits);
    let t = Instant::now();
    let mut out = Vec::new();
    p.join(1, "a", 7);
    p.join(2, "b", 7);
    p.join(3, "other user", 8);
    for s in 0..2 {
        register(&mut p, 1, s, s, 0, D, t, &mut out);
    }
    register(&mut p, 2, 1, 1, 0, D, t, &mut out);
    let e = p
        .request(
            2,
            2,
            Request::Register {
                stream: 2,
                priority: 0,
                device: D,
            },
            t,
            &mut out,
        )
        .unwrap_err();
    assert_eq!(e.code, Code::Limit);
    assert!(e.message.contains("uid 7 has 3 streams"), "{e}");
    p.request(
        3,
        1,
        Request::Register {
            stream: 1,
            priority: 0,
            device: D,
        },
        t,
        &mut out,
    )
    .expect("another uid has its own share");
    // Streams given back (unregistered, or their client gone) count no more.
    p.request(1, 9, Request::Unregister { stream: 0 }, t, &mut out).unwrap();
    register(&mut p, 2, 3, 2, 0, D, t, &mut out);
    p.drop_client(1, t, &mut out);
    register(&mut p, 2, 4, 3, 0, D, t, &mut out);
}

#[test]
fn an_enter_waits_one_ack_timeout_at_most_even_for_a_chain_of_orders() {
    let (mut p, t) = plan();
    let mut out = Vec::new();
    p.join(1, "slow lp", 1);
    p.join(2, "hp", 2);
    register(&mut p, 1, 1, 1, 0, D, t, &mut out);
    p.request(2, 1, Request::Enter { priority: 1, device: D }, t, &mut out)
        .unwrap();
    let s1 = orders(&out)[0].3;
    ack(&mut p, 1, s1, true, t);
    let mut out = Vec::new();
    p.request(2, 2, Request::Leave { priority: 1, device: D }, t, &mut out)
        .unwrap();
    let r = orders(&out)[0].3;
    // The resume is on its way when the next block enters: it waits for the resume's ack and
    // then the new suspend's, each just in time; but no longer than one ack timeout in all.
    let t1 = t + ACK / 2;
    let mut out = Vec::new();
    p.request(2, 3, Request::Enter { priority: 1, device: D }, t1, &mut out)
        .unwrap();
    assert!(sent_to(&out, 2).is_empty());
    let out = ack(&mut p, 1, r, true, t1 + ACK * 9 / 10);
    let s2 = orders(&out)[0].3;
    assert_eq!(orders(&out)[0].2, Suspend);
    let mut out = Vec::new();
    p.tick(t1 + ACK, &mut out);
    assert_eq!(
        sent_to(&out, 2),
        vec![Entered {
            re: 3,
            suspended: 0,
            failed: 0,
            late: 1
        }],
        "replied at its own ack timeout"
    );
    // The suspend itself is not late yet: the client is not stalled for it.
    let out = ack(&mut p, 1, s2, true, t1 + ACK * 15 / 10);
    assert!(
        !out.iter()
            .any(|o| matches!(o, Out::ClientLog(_, l) if l.contains("stalled")))
    );
}

#[test]
fn blocks_the_daemon_ended_cost_no_memory_however_many() {
    let limits = Limits {
        max_block: Duration::from_millis(1),
        blocks_per_client: 4,
        ..Limits::default()
    };
    let mut p = Plan::new(ACK, limits);
    let mut t = Instant::now();
    let mut out = Vec::new();
    p.join(1, "hp", 1);
    for prio in 0..10_000 {
        p.request(
            1,
            1,
            Request::Enter {
                priority: prio,
                device: D,
            },
            t,
            &mut out,
        )
        .unwrap();
        t += Duration::from_millis(2);
        p.tick(t, &mut out);
        out.clear();
    }
    assert_eq!(
        p.clients.get(&1).unwrap().expired,
        4,
        "a count, capped at the block limit"
    );
    // Its leaves of ended blocks are done, four of them; the fifth names no block.
    for _ in 0..4 {
        p.request(
            1,
            2,
            Request::Leave {
                priority: 12_345,
                device: D,
            },
            t,
            &mut out,
        )
        .unwrap();
    }
    assert_eq!(
        p.request(1, 3, Request::Leave { priority: 1, device: D }, t, &mut out)
            .unwrap_err()
            .code,
        Code::NotActive
    );
}
