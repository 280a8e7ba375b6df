//! The stand-in runtime from Rust: what its streams, events and kernels do, including the wait
//! that the interposer must never cause (a stream waiting on a suspended stream's event).
use hip_standin::code;
use hip_standin::kernels::{DELAY_TAG_MAGIC, Kernel, NS_PER_TICK, SLOT_BYTES};
use hip_standin::runtime::{self, Runtime};
use std::sync::mpsc;
use std::time::Duration;

fn rt() -> &'static Runtime {
    runtime::start_with(host_device::testing::built_worker()).expect("the stand-in starts")
}

fn delay_args(slots: usize, cmd: u32, ms: u64) -> Vec<Vec<u8>> {
    let ticks = ms * 1_000_000 / NS_PER_TICK;
    vec![
        (slots as u64).to_le_bytes().to_vec(),
        cmd.to_le_bytes().to_vec(),
        ticks.to_le_bytes().to_vec(),
        1u32.to_le_bytes().to_vec(),
    ]
}

fn slot(rt: &Runtime, slots: usize, cmd: usize) -> (u32, u32, u64) {
    let mut b = [0u8; SLOT_BYTES];
    rt.mem.read(slots + cmd * SLOT_BYTES, &mut b).unwrap();
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    (
        u32_at(16),
        u32_at(20),
        u64::from_le_bytes(b[24..32].try_into().unwrap()),
    )
}

#[test]
fn a_delay_kernel_books_its_slot_once_as_the_gpu_kernel_does() {
    let rt = rt();
    let s = rt.create_stream(0, 0).unwrap();
    let slots = rt.mem.alloc(4 * SLOT_BYTES).unwrap();
    for cmd in 0..4 {
        let call = Kernel::Delay.call(&delay_args(slots, cmd, 1), &rt.mem).unwrap();
        rt.launch(s, call).unwrap();
    }
    rt.stream(s).unwrap().synchronize().unwrap();
    for cmd in 0..4u32 {
        assert_eq!(slot(rt, slots, cmd as usize), (1, 1, u64::from(cmd) ^ DELAY_TAG_MAGIC));
    }
    rt.destroy_stream(s).unwrap();
}

#[test]
fn a_kernel_writing_outside_device_memory_is_refused_at_launch() {
    let rt = rt();
    let slots = rt.mem.alloc(SLOT_BYTES).unwrap();
    assert_eq!(
        Kernel::Delay.call(&delay_args(slots, 1, 1), &rt.mem),
        Err(code::INVALID_VALUE),
        "slot 1 of a 1-slot buffer"
    );
    assert_eq!(
        Kernel::Delay.call(&delay_args(0x1000, 0, 1), &rt.mem),
        Err(code::INVALID_VALUE),
        "not device memory"
    );
    assert_eq!(
        Kernel::HpProbe.call(&delay_args(slots, 0, 1), &rt.mem),
        Err(code::INVALID_VALUE),
        "wrong argument count"
    );
    assert_eq!(rt.stream(0x1234).err(), Some(code::INVALID_HANDLE));
}

#[test]
fn a_stream_waiting_on_a_suspended_streams_event_waits_until_it_is_resumed() {
    // The deadlock the interposer must avoid, built on purpose: HP waits on an event LP records
    // after its command; with LP suspended, HP cannot finish; resuming LP releases it.
    let rt = rt();
    let (lp, hp) = (rt.create_stream(1, 1).unwrap(), rt.create_stream(1, -1).unwrap());
    let slots = rt.mem.alloc(2 * SLOT_BYTES).unwrap();
    let ev = rt.create_event();
    let lps = rt.stream(lp).unwrap();
    rt.launch(lp, Kernel::Delay.call(&delay_args(slots, 0, 50), &rt.mem).unwrap())
        .unwrap();
    lps.record(&rt.event(ev).unwrap()).unwrap();
    lps.suspend().unwrap();
    let hps = rt.stream(hp).unwrap();
    hps.wait_event(&rt.event(ev).unwrap()).unwrap();
    rt.launch(hp, Kernel::Delay.call(&delay_args(slots, 1, 1), &rt.mem).unwrap())
        .unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(hps.synchronize()).unwrap());
    assert!(
        rx.recv_timeout(Duration::from_secs(2)).is_err(),
        "HP is stuck behind the suspended LP stream"
    );
    lps.resume().unwrap();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(60)).unwrap(),
        Ok(()),
        "LP resumed: HP completes"
    );
    assert_eq!(slot(rt, slots, 0).1, 1, "LP's command completed once");
    assert_eq!(slot(rt, slots, 1).1, 1, "and then HP's");
}

#[test]
fn a_stream_suspended_before_its_first_use_runs_nothing_until_resumed() {
    // Streams start their workers at the first use; a suspend that comes first must still hold
    // the first kernel back (the interposer suspends streams a program has not used yet).
    let rt = rt();
    let s = rt.create_stream(0, 1).unwrap();
    let st = rt.stream(s).unwrap();
    assert!(st.pids().is_empty(), "no worker before the first use");
    st.suspend().unwrap();
    let slots = rt.mem.alloc(SLOT_BYTES).unwrap();
    rt.launch(s, Kernel::Delay.call(&delay_args(slots, 0, 1), &rt.mem).unwrap())
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(slot(rt, slots, 0).1, 0, "held back: not run");
    assert!(!st.pids().is_empty());
    for pid in st.pids() {
        assert_eq!(host_device::proc_state(pid).unwrap(), 'T', "worker {pid} is stopped");
    }
    st.resume().unwrap();
    st.synchronize().unwrap();
    assert_eq!(slot(rt, slots, 0).1, 1, "ran once after the resume");
}
