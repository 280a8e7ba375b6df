use super::*;

fn payload(frame: &[u8]) -> Vec<u8> {
    let mut d = Decoder::new();
    d.push(frame);
    d.next_frame().unwrap().unwrap()
}

#[test]
fn every_request_goes_through_the_wire_and_back() {
    let all = [
        Request::Hello {
            name: "pid 1 lp".into(),
        },
        Request::Register {
            stream: 3,
            priority: -2,
            device: Device::kfd(0xbeef),
        },
        Request::Unregister { stream: 3 },
        Request::Enter {
            priority: 1,
            device: Device::host(0),
        },
        Request::Leave {
            priority: 1,
            device: Device::host(u32::MAX),
        },
        Request::Ack {
            order: 9,
            ok: false,
            error: Some("x".repeat(MAX_TEXT)),
        },
        Request::Ping {},
        Request::Status {},
    ];
    for (seq, msg) in (1..).zip(all) {
        let back = decode_request(&payload(&encode_request(seq, msg.clone()))).unwrap();
        assert_eq!(back, ClientFrame { v: VERSION, seq, msg });
    }
}

#[test]
fn the_largest_notice_fits_a_frame() {
    let n = Notice::Refused {
        re: Some(u64::MAX),
        code: Code::OutOfOrder,
        message: ProtoError::new(Code::OutOfOrder, "\u{00e9}".repeat(MAX_TEXT)).message,
    };
    let f = encode_notice(n.clone());
    assert!(f.len() <= frame::HEADER + MAX_FRAME);
    assert_eq!(decode_notice(&payload(&f)).unwrap(), n);
}

#[test]
fn bad_requests_are_refused_with_their_reason_and_seq() {
    let cases: [(&str, Option<u64>, Code); 11] = [
        ("", None, Code::Malformed),
        ("[1,2]", None, Code::Malformed),
        (r#"{"seq":4,"msg":{"type":"ping"}}"#, Some(4), Code::Malformed),
        (r#"{"v":1,"seq":5,"msg":{"type":"ping"}}"#, Some(5), Code::Version),
        (r#"{"v":2,"seq":6,"msg":{"type":"explode"}}"#, Some(6), Code::Malformed),
        (
            r#"{"v":2,"seq":7,"msg":{"type":"ping","x":1}}"#,
            Some(7),
            Code::Malformed,
        ),
        (
            r#"{"v":2,"seq":8,"msg":{"type":"ping"},"extra":0}"#,
            Some(8),
            Code::Malformed,
        ),
        (
            r#"{"v":2,"seq":9,"msg":{"type":"register","stream":-1,"priority":0,"device":{"kind":"host","id":0}}}"#,
            Some(9),
            Code::Malformed,
        ),
        (
            r#"{"v":2,"seq":10,"msg":{"type":"enter","priority":4294967296,"device":{"kind":"host","id":0}}}"#,
            Some(10),
            Code::Malformed,
        ),
        (
            r#"{"v":2,"seq":11,"msg":{"type":"hello","name":""}}"#,
            Some(11),
            Code::Malformed,
        ),
        (
            r#"{"v":2,"seq":12,"msg":{"type":"hello","name":"a\nb"}}"#,
            Some(12),
            Code::Malformed,
        ),
    ];
    for (text, seq, code) in cases {
        let (got_seq, e) = decode_request(text.as_bytes()).unwrap_err();
        assert_eq!((got_seq, e.code), (seq, code), "{text}: {e}");
        assert!(e.message.len() <= MAX_TEXT);
    }
    let long = format!(
        r#"{{"v":{VERSION},"seq":1,"msg":{{"type":"hello","name":"{}"}}}}"#,
        "n".repeat(MAX_NAME + 1)
    );
    assert_eq!(decode_request(long.as_bytes()).unwrap_err().1.code, Code::Malformed);
}

/// Random bytes and mutations of valid frames: the decoder answers (a request or a refusal),
/// never panics.
#[test]
fn fuzzed_payloads_never_panic() {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let valid = payload(&encode_request(
        3,
        Request::Ack {
            order: 1,
            ok: true,
            error: None,
        },
    ));
    let mut accepted = 0;
    for i in 0..20_000 {
        let mut bytes = if i % 2 == 0 {
            valid.clone()
        } else {
            (0..next() % 64).map(|_| next().to_le_bytes()[0]).collect()
        };
        for _ in 0..(next() % 4) {
            if bytes.is_empty() {
                break;
            }
            let at = usize::try_from(next()).unwrap() % bytes.len();
            bytes[at] = next().to_le_bytes()[0];
        }
        if decode_request(&bytes).is_ok() {
            accepted += 1;
        }
    }
    assert!(
        accepted > 0,
        "some mutations keep the frame valid (e.g. a digit changed)"
    );
}

/// The device a stream or block is on: required on `register`, `enter` and `leave`, of a known
/// kind, with no other field, a kfd id never 0; a first-version frame (no device) is refused as
/// another version, not read as "every device".
#[test]
fn devices_are_required_and_checked_at_the_door() {
    let ok = [
        (r#"{"kind":"kfd","id":48063}"#, Device::kfd(48063)),
        (r#"{"kind":"host","id":0}"#, Device::host(0)),
        (r#"{"kind":"host","id":4294967295}"#, Device::host(u32::MAX)),
    ];
    for (dev, want) in ok {
        let text = format!(r#"{{"v":2,"seq":1,"msg":{{"type":"enter","priority":1,"device":{dev}}}}}"#);
        let f = decode_request(text.as_bytes()).unwrap();
        assert_eq!(
            f.msg,
            Request::Enter {
                priority: 1,
                device: want
            },
            "{dev}"
        );
    }
    let bad = [
        // Missing, on each request that needs one.
        r#"{"type":"register","stream":1,"priority":0}"#,
        r#"{"type":"enter","priority":1}"#,
        r#"{"type":"leave","priority":1}"#,
        // Wrong kind, wrong shape, an unknown field, out of range, a CPU node's id.
        r#"{"type":"enter","priority":1,"device":{"kind":"hip","id":0}}"#,
        r#"{"type":"enter","priority":1,"device":{"kind":"KFD","id":1}}"#,
        r#"{"type":"enter","priority":1,"device":{"kind":"host"}}"#,
        r#"{"type":"enter","priority":1,"device":{"id":1}}"#,
        r#"{"type":"enter","priority":1,"device":"host:0"}"#,
        r#"{"type":"enter","priority":1,"device":null}"#,
        r#"{"type":"enter","priority":1,"device":{"kind":"host","id":0,"pci":"0000:c1:00.0"}}"#,
        r#"{"type":"enter","priority":1,"device":{"kind":"host","id":-1}}"#,
        r#"{"type":"enter","priority":1,"device":{"kind":"host","id":4294967296}}"#,
        r#"{"type":"leave","priority":1,"device":{"kind":"kfd","id":0}}"#,
        r#"{"type":"register","stream":1,"priority":0,"device":{"kind":"kfd","id":0}}"#,
        // A device where none belongs.
        r#"{"type":"unregister","stream":1,"device":{"kind":"host","id":0}}"#,
        r#"{"type":"ping","device":{"kind":"host","id":0}}"#,
    ];
    for msg in bad {
        let text = format!(r#"{{"v":2,"seq":3,"msg":{msg}}}"#);
        let (seq, e) = decode_request(text.as_bytes()).unwrap_err();
        assert_eq!((seq, e.code), (Some(3), Code::Malformed), "{msg}: {e}");
        assert!(e.message.len() <= MAX_TEXT);
    }
    let v1 = r#"{"v":1,"seq":4,"msg":{"type":"enter","priority":1}}"#;
    assert_eq!(
        decode_request(v1.as_bytes()).unwrap_err(),
        (
            Some(4),
            ProtoError::new(Code::Version, "protocol version 1; this daemon speaks 2")
        )
    );
    assert_eq!(Device::kfd(0xbeef).to_string(), "gpu 0xbeef");
    assert_eq!(Device::host(1).to_string(), "host:1");
}
