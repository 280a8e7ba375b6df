//! A library kernel through the stand-in runtime, suspended in the middle and resumed: its
//! result is the one computed without a suspension, and the stream counts the suspend as one
//! that found a kernel running.
use hip_standin::kernels::Kernel;
use hip_standin::library::{NS_PER_MAC, sgemm_rows};
use hip_standin::runtime::{self, Runtime};
use std::time::{Duration, Instant};

fn rt() -> &'static Runtime {
    runtime::start_with(host_device::testing::built_worker()).expect("the stand-in starts")
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn a_gemm_suspended_mid_kernel_gives_the_unsuspended_result() {
    let rt = rt();
    let (m, n, k) = (160usize, 128usize, 100usize);
    let a: Vec<f32> = (0..m * k).map(|i| ((i % 13) as f32 - 6.0) * 0.25).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i % 7) as f32 - 3.0) * 0.5).collect();
    let [pa, pb, pc] = [m * k, k * n, m * n].map(|e| rt.mem.alloc(4 * e).unwrap());
    rt.mem.write(pa, &f32s(&a)).unwrap();
    rt.mem.write(pb, &f32s(&b)).unwrap();
    let dims = |v: usize| u32::try_from(v).unwrap().to_le_bytes().to_vec();
    let args = vec![
        (pa as u64).to_le_bytes().to_vec(),
        (pb as u64).to_le_bytes().to_vec(),
        (pc as u64).to_le_bytes().to_vec(),
        dims(m),
        dims(n),
        dims(k),
    ];
    let s = rt.create_stream(0, 0).unwrap();
    let stream = rt.stream(s).unwrap();
    let call = Kernel::Sgemm.call(&args, &rt.mem).unwrap();
    let work = Duration::from_nanos((m * n * k) as u64 * NS_PER_MAC);
    rt.launch(s, call).unwrap();
    // Inside the kernel (its workers' start-up comes first), then held for as long as it runs.
    let t0 = Instant::now();
    while !stream.is_running() {
        assert!(t0.elapsed() < Duration::from_secs(20), "the kernel never started");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(work / 4);
    stream.suspend().unwrap();
    assert!(
        !stream.is_idle(),
        "the kernel ({work:?} of work) ended before the suspend"
    );
    std::thread::sleep(work);
    assert!(!stream.is_idle(), "a suspended kernel completed");
    stream.resume().unwrap();
    let t0 = Instant::now();
    stream.synchronize().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(30));
    assert_eq!(
        stream.suspend_counts(),
        (1, 1),
        "one suspend, and it found the kernel running"
    );
    let mut raw = vec![0u8; 4 * m * n];
    rt.mem.read(pc, &mut raw).unwrap();
    let got: Vec<f32> = raw
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let mut want = vec![0f32; m * n];
    sgemm_rows(&a, &b, n, k, 0..m, &mut want);
    assert_eq!(got, want);
    // A suspend of an idle stream is counted, but not as one that found a kernel running.
    stream.suspend().unwrap();
    stream.resume().unwrap();
    assert_eq!(stream.suspend_counts(), (2, 1));
    rt.destroy_stream(s).unwrap();
}
