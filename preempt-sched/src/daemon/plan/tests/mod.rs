//! The plan's rules, without sockets: who suspends what for whom, acks, late orders, dropped
//! clients.
//!
//! Long because every rule of the plan has its cases here, in the order the plan states them.
use super::*;
use crate::proto::Notice::{Done, Entered, Order as Ord};
use OrderAction::{Resume, Suspend};

const ACK: Duration = Duration::from_millis(100);

/// The device of the tests that are not about devices.
const D: Device = Device::host(0);

fn plan() -> (Plan, Instant) {
    (Plan::new(ACK, Limits::default()), Instant::now())
}

/// The orders in `out`, as (client, stream, action, order number).
fn orders(out: &[Out]) -> Vec<(ClientId, u64, OrderAction, u64)> {
    out.iter()
        .filter_map(|o| match o {
            Out::Send(c, Ord { order, stream, action }) => Some((*c, *stream, *action, *order)),
            _ => None,
        })
        .collect()
}

fn sent_to(out: &[Out], c: ClientId) -> Vec<Notice> {
    out.iter()
        .filter_map(|o| match o {
            Out::Send(to, n) if *to == c => Some(n.clone()),
            _ => None,
        })
        .collect()
}

/// Client `c`'s request `seq`: its stream `stream` registered at `priority` on `device`.
#[allow(clippy::too_many_arguments)]
fn register(
    p: &mut Plan,
    c: ClientId,
    seq: u64,
    stream: u64,
    priority: i32,
    device: Device,
    now: Instant,
    out: &mut Vec<Out>,
) {
    p.request(
        c,
        seq,
        Request::Register {
            stream,
            priority,
            device,
        },
        now,
        out,
    )
    .unwrap();
}

fn ack(p: &mut Plan, c: ClientId, order: u64, ok: bool, now: Instant) -> Vec<Out> {
    let mut out = Vec::new();
    p.request(c, 100 + order, Request::Ack { order, ok, error: None }, now, &mut out)
        .unwrap();
    out
}

#[test]
fn an_hp_block_of_one_client_suspends_the_others_streams_and_enter_waits_for_the_acks() {
    let (mut p, t) = plan();
    let mut out = Vec::new();
    p.join(1, "lp-a", 1000);
    p.join(2, "lp-b", 1000);
    p.join(3, "hp", 1000);
    register(&mut p, 1, 1, 1, 0, D, t, &mut out);
    register(&mut p, 2, 1, 1, 0, D, t, &mut out);
    assert_eq!(sent_to(&out, 1), vec![Done { re: 1 }]);
    out.clear();
    p.request(3, 7, Request::Enter { priority: 1, device: D }, t, &mut out)
        .unwrap();
    let o = orders(&out);
    assert_eq!(
        o.iter().map(|x| (x.0, x.1, x.2)).collect::<Vec<_>>(),
        vec![(1, 1, Suspend), (2, 1, Suspend)],
        "the same stream id of two clients is two streams"
    );
    assert!(sent_to(&out, 3).is_empty(), "enter waits for the acks");
    assert!(ack(&mut p, 1, o[0].3, true, t).is_empty());
    let out = ack(&mut p, 2, o[1].3, true, t);
    assert_eq!(
        sent_to(&out, 3),
        vec![Entered {
            re: 7,
            suspended: 2,
            failed: 0,
            late: 0
        }]
    );
    let mut out = Vec::new();
    p.request(3, 8, Request::Leave { priority: 1, device: D }, t, &mut out)
        .unwrap();
    assert_eq!(sent_to(&out, 3), vec![Done { re: 8 }]);
    let o = orders(&out);
    assert_eq!(o.iter().map(|x| x.2).collect::<Vec<_>>(), vec![Resume, Resume]);
}

#[test]
fn a_client_names_only_its_own_streams_and_blocks() {
    let (mut p, t) = plan();
    let mut out = Vec::new();
    p.join(1, "a", 1000);
    p.join(2, "b", 1000);
    register(&mut p, 1, 1, 5, 0, D, t, &mut out);
    let e = p
        .request(2, 1, Request::Unregister { stream: 5 }, t, &mut out)
        .unwrap_err();
    assert_eq!(e.code, Code::UnknownStream);
    p.request(1, 2, Request::Enter { priority: 3, device: D }, t, &mut out)
        .unwrap();
    let e = p
        .request(2, 2, Request::Leave { priority: 3, device: D }, t, &mut out)
        .unwrap_err();
    assert_eq!(e.code, Code::NotActive, "b cannot end a's block");
    // b cannot ack a's order either.
    let order = orders(&out)[0].3;
    let e = p
        .request(
            2,
            3,
            Request::Ack {
                order,
                ok: true,
                error: None,
            },
            t,
            &mut out,
        )
        .unwrap_err();
    assert_eq!(e.code, Code::OutOfOrder);
    let e = p.request(9, 1, Request::Ping {}, t, &mut out).unwrap_err();
    assert_eq!(e.code, Code::OutOfOrder, "no request before hello");
    let e = p
        .request(1, 4, Request::Hello { name: "again".into() }, t, &mut out)
        .unwrap_err();
    assert_eq!(e.code, Code::OutOfOrder);
}

#[test]
fn an_unacknowledged_order_is_reported_late_and_enter_does_not_wait_for_it() {
    let (mut p, t) = plan();
    let mut out = Vec::new();
    p.join(1, "silent", 1000);
    p.join(2, "hp", 1000);
    register(&mut p, 1, 1, 1, 0, D, t, &mut out);
    out.clear();
    p.request(2, 1, Request::Enter { priority: 1, device: D }, t, &mut out)
        .unwrap();
    let order = orders(&out)[0].3;
    assert_eq!(p.next_deadline(), Some(t + ACK));
    out.clear();
    p.tick(t + ACK / 2, &mut out);
    assert!(out.is_empty());
    p.tick(t + ACK, &mut out);
    assert_eq!(
        sent_to(&out, 2),
        vec![Entered {
            re: 1,
            suspended: 0,
            failed: 0,
            late: 1
        }]
    );
    assert!(
        out.iter()
            .any(|o| matches!(o, Out::ClientLog(_, l) if l.contains("not acknowledged")))
    );
    assert_eq!(
        p.next_deadline(),
        Some(t + super::DEFAULT_BLOCK_SILENCE),
        "a late order has no deadline any more: only the block's own lease is left"
    );
    // A late ack is still accepted (and logged), not refused.
    let out = ack(&mut p, 1, order, true, t + ACK * 3);
    assert!(
        out.iter()
            .any(|o| matches!(o, Out::ClientLog(_, l) if l.contains("(the last 300 ms after it was sent)")))
    );
}

#[test]
fn a_dropped_client_ends_its_blocks_and_the_others_resume() {
    let (mut p, t) = plan();
    let mut out = Vec::new();
    p.join(1, "lp", 1000);
    p.join(2, "hp", 1000);
    register(&mut p, 1, 1, 1, 0, D, t, &mut out);
    register(&mut p, 2, 1, 1, 5, D, t, &mut out);
    p.request(2, 2, Request::Enter { priority: 1, device: D }, t, &mut out)
        .unwrap();
    p.request(2, 3, Request::Enter { priority: 1, device: D }, t, &mut out)
        .unwrap();
    let suspend = orders(&out)[0].3;
    ack(&mut p, 1, suspend, true, t);
    out.clear();
    p.drop_client(2, t, &mut out);
    let o = orders(&out);
    assert_eq!(
        o.iter().map(|x| (x.0, x.1, x.2)).collect::<Vec<_>>(),
        vec![(1, 1, Resume)],
        "both of its blocks ended; nothing is sent to the dropped client"
    );
    assert_eq!(p.clients(), 1);
    // The lp client dies while its resume is unacknowledged and while an enter of another
    // client waits for it (a stream with an order in flight is not known to be suspended): the
    // enter replies, counting it failed.
    p.join(3, "hp2", 1000);
    out.clear();
    p.request(3, 1, Request::Enter { priority: 1, device: D }, t, &mut out)
        .unwrap();
    out.clear();
    p.drop_client(1, t, &mut out);
    assert_eq!(
        sent_to(&out, 3),
        vec![Entered {
            re: 1,
            suspended: 0,
            failed: 1,
            late: 0
        }]
    );
    assert_eq!(
        p.next_deadline(),
        Some(t + super::DEFAULT_BLOCK_SILENCE),
        "no ack deadline left: only hp2's block lease"
    );
}

#[test]
fn a_failed_suspend_is_counted_and_kept_true_in_the_policy() {
    let (mut p, t) = plan();
    let mut out = Vec::new();
    p.join(1, "lp", 1000);
    register(&mut p, 1, 1, 1, 0, D, t, &mut out);
    p.request(1, 2, Request::Enter { priority: 1, device: D }, t, &mut out)
        .unwrap();
    let order = orders(&out)[0].3;
    let out = ack(&mut p, 1, order, false, t);
    assert_eq!(
        sent_to(&out, 1),
        vec![Entered {
            re: 2,
            suspended: 0,
            failed: 1,
            late: 0
        }]
    );
    let mut out = Vec::new();
    p.request(1, 3, Request::Status {}, t, &mut out).unwrap();
    assert!(matches!(
        sent_to(&out, 1)[0],
        Notice::Status {
            suspended: 0,
            blocks: 1,
            ..
        }
    ));
}

#[test]
fn limits_are_refused_not_grown() {
    let mut p = Plan::new(
        ACK,
        Limits {
            streams_per_client: 2,
            blocks_per_client: 1,
            ..Limits::default()
        },
    );
    let t = Instant::now();
    let mut out = Vec::new();
    p.join(1, "greedy", 1000);
    for s in 0..2 {
        register(&mut p, 1, s, s, 0, D, t, &mut out);
    }
    p.request(
        1,
        9,
        Request::Register {
            stream: 1,
            priority: 3,
            device: D,
        },
        t,
        &mut out,
    )
    .expect("re-registering an own stream is no new stream");
    let e = p
        .request(
            1,
            3,
            Request::Register {
                stream: 7,
                priority: 0,
                device: D,
            },
            t,
            &mut out,
        )
        .unwrap_err();
    assert_eq!(e.code, Code::Limit);
    p.join(2, "hp", 1000);
    p.request(2, 1, Request::Enter { priority: 9, device: D }, t, &mut out)
        .unwrap();
    assert_eq!(
        p.request(2, 2, Request::Enter { priority: 9, device: D }, t, &mut out)
            .unwrap_err()
            .code,
        Code::Limit
    );
}

mod bounds;

/// The status' device count.
fn devices(p: &mut Plan) -> u32 {
    let mut out = Vec::new();
    if !p.knows(99) {
        p.join(99, "status", 1000);
    }
    p.request(99, 999, Request::Status {}, Instant::now(), &mut out)
        .unwrap();
    match sent_to(&out, 99).pop() {
        Some(Notice::Status { devices, .. }) => devices,
        n => panic!("{n:?}"),
    }
}

#[test]
fn blocks_on_two_devices_suspend_only_their_own_devices_streams() {
    let (mut p, t) = plan();
    let (d0, d1) = (Device::kfd(0x1111), Device::kfd(0x2222));
    let mut out = Vec::new();
    p.join(1, "lp", 1000);
    p.join(2, "hp", 1000);
    for (stream, device) in [(10, d0), (11, d1)] {
        p.request(
            1,
            stream,
            Request::Register {
                stream,
                priority: 0,
                device,
            },
            t,
            &mut out,
        )
        .unwrap();
    }
    assert_eq!(devices(&mut p), 2);
    out.clear();
    p.request(
        2,
        1,
        Request::Enter {
            priority: 1,
            device: d0,
        },
        t,
        &mut out,
    )
    .unwrap();
    let o = orders(&out);
    assert_eq!(o.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(), vec![(10, Suspend)]);
    // A block on the other device, while d0's suspend is still in flight, waits for d1's only.
    let mut out1 = Vec::new();
    p.request(
        2,
        2,
        Request::Enter {
            priority: 1,
            device: d1,
        },
        t,
        &mut out1,
    )
    .unwrap();
    let o1 = orders(&out1);
    assert_eq!(o1.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(), vec![(11, Suspend)]);
    let out1 = ack(&mut p, 1, o1[0].3, true, t);
    assert_eq!(
        sent_to(&out1, 2),
        vec![Entered {
            re: 2,
            suspended: 1,
            failed: 0,
            late: 0
        }],
        "d1's block does not wait for d0's suspend"
    );
    let out0 = ack(&mut p, 1, o[0].3, true, t);
    assert_eq!(
        sent_to(&out0, 2),
        vec![Entered {
            re: 1,
            suspended: 1,
            failed: 0,
            late: 0
        }]
    );
    // A leave names the device its block is on; the other device's block is not it.
    let mut out = Vec::new();
    let e = p
        .request(
            2,
            3,
            Request::Leave {
                priority: 2,
                device: d0,
            },
            t,
            &mut out,
        )
        .unwrap_err();
    assert_eq!(e.code, Code::NotActive);
    p.request(
        2,
        4,
        Request::Leave {
            priority: 1,
            device: d1,
        },
        t,
        &mut out,
    )
    .unwrap();
    assert_eq!(
        orders(&out).iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
        vec![(11, Resume)],
        "d0's stream stays suspended by d0's block"
    );
    // A device with no stream and no block leaves the plan.
    p.join(3, "other", 1000);
    let mut out = Vec::new();
    let d2 = Device::host(2);
    p.request(
        3,
        1,
        Request::Enter {
            priority: 1,
            device: d2,
        },
        t,
        &mut out,
    )
    .unwrap();
    assert_eq!(devices(&mut p), 3);
    p.request(
        3,
        2,
        Request::Leave {
            priority: 1,
            device: d2,
        },
        t,
        &mut out,
    )
    .unwrap();
    assert_eq!(devices(&mut p), 2);
    p.drop_client(1, t, &mut out);
    p.drop_client(2, t, &mut out);
    assert_eq!(
        devices(&mut p),
        0,
        "every device's plan goes with its last stream and block"
    );
}

#[test]
fn a_client_names_a_bounded_number_of_devices_and_a_stream_keeps_its_device() {
    let (mut p, t) = plan();
    let most = Limits::default().devices_per_client;
    assert_eq!(most, crate::proto::MAX_DEVICES_PER_CLIENT);
    p.join(1, "many", 1000);
    let mut out = Vec::new();
    let gpu = |i: usize| Device::kfd(u32::try_from(i).unwrap() + 1);
    for i in 0..most - 1 {
        let stream = u64::try_from(i).unwrap();
        p.request(
            1,
            stream,
            Request::Register {
                stream,
                priority: 0,
                device: gpu(i),
            },
            t,
            &mut out,
        )
        .unwrap();
    }
    // The last device by a block, then nothing new, by stream or block.
    p.request(
        1,
        500,
        Request::Enter {
            priority: 1,
            device: gpu(most - 1),
        },
        t,
        &mut out,
    )
    .unwrap();
    let e = p
        .request(
            1,
            501,
            Request::Register {
                stream: 9999,
                priority: 0,
                device: gpu(most),
            },
            t,
            &mut out,
        )
        .unwrap_err();
    assert_eq!(e.code, Code::Limit, "{}", e.message);
    assert!(
        e.message.contains(&format!("at most {most} devices per client")),
        "{}",
        e.message
    );
    let e = p
        .request(
            1,
            502,
            Request::Enter {
                priority: 1,
                device: Device::host(0),
            },
            t,
            &mut out,
        )
        .unwrap_err();
    assert_eq!(e.code, Code::Limit);
    // More streams and blocks on a device it has are fine.
    register(&mut p, 1, 503, 9999, 0, gpu(0), t, &mut out);
    p.request(
        1,
        504,
        Request::Enter {
            priority: 1,
            device: gpu(0),
        },
        t,
        &mut out,
    )
    .unwrap();
    // A stream stays on its device.
    let e = p
        .request(
            1,
            505,
            Request::Register {
                stream: 9999,
                priority: 3,
                device: gpu(1),
            },
            t,
            &mut out,
        )
        .unwrap_err();
    assert_eq!(e.code, Code::OutOfOrder, "{}", e.message);
    // A device freed (its last stream gone) makes room for another.
    p.request(1, 506, Request::Unregister { stream: 1 }, t, &mut out)
        .unwrap();
    p.request(
        1,
        507,
        Request::Enter {
            priority: 1,
            device: Device::host(0),
        },
        t,
        &mut out,
    )
    .unwrap();
    assert_eq!(devices(&mut p), u32::try_from(most).unwrap());
    // Another client has its own bound.
    p.join(2, "other", 1000);
    p.request(
        2,
        1,
        Request::Enter {
            priority: 1,
            device: Device::host(7),
        },
        t,
        &mut out,
    )
    .unwrap();
}
