//! `preempt-lat __bystander-worker`: the other process of the bystander check. It runs short
//! delay kernels one after another on a queue of its own and writes each one's host stamps
//! ([`super::protocol`]) until its stdin closes or `--max-duration-ms` passes.
//!
//! `--device hip:N`: the light delay kernel, one block of 4 waves per CU (so it runs beside the
//! parent's LP kernel, 16 waves per CU, within a gfx942 CU's 32 wave slots, and every CU has
//! bystander waves for a whole-node unmap to save), on an own-queue stream, T calibrated like a
//! run's; each kernel is launched and waited for (hipStreamSynchronize) before the next.
//! `--device host`: the same protocol with a CPU spin in place of the kernel, for testing the
//! protocol and the parent's handling without a GPU. A GPU that cannot run is refused before
//! `ready`, with the reason on stderr.
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use gpu_device::hip_rt::{Device, DeviceBuffer, Hip, Mem, Stream};
use gpu_device::{DelayKernel, LpState, calib, kernel};
use preempt_api::now_ns;

use super::protocol::Line;
use crate::error::{Context, Error};
use crate::options::{BystanderWorkerOptions, DeviceSpec};

/// One kernel after another, by device.
enum Load {
    Host { ns: u64 },
    Gpu(Box<GpuLoad>),
}

struct GpuLoad {
    // Field order is drop order: stream and buffer before the module and the device.
    stream: Stream,
    slots: DeviceBuffer,
    k: DelayKernel,
    ticks: u64,
    _dev: Device,
}

impl Load {
    fn one(&self) -> Result<(), Error> {
        match self {
            Load::Host { ns } => {
                let end = now_ns() + ns;
                while now_ns() < end {
                    std::hint::spin_loop();
                }
                Ok(())
            }
            Load::Gpu(g) => {
                // Slot 0 every time: its counters only add up; nothing here reads them.
                g.k.launch(&g.stream, Mem::Device(&g.slots), 0, g.ticks)
                    .context("launching the delay kernel")?;
                g.stream.synchronize().context("waiting for the delay kernel")
            }
        }
    }
}

fn gpu_load(index: u32, kernel_ms: f64) -> Result<(Load, String), Error> {
    let hip = Hip::load().with_context(|| format!("hip:{index} cannot run here"))?;
    let dev = gpu_device::open(&hip, index).with_context(|| format!("hip:{index} cannot run here"))?;
    let arch = gpu_device::gfx_target(&dev.info).context("gfx target")?;
    let code = kernel::compile(&hip, &arch).context("compiling delay.hip with hiprtc")?;
    let grid = calib::grid_for(dev.info.cu_count, 1, 4, dev.info.wave_size).context("bystander grid")?;
    let k = DelayKernel::load(&dev, &code, LpState::Light, grid).context("loading the delay kernel")?;
    let stream = dev.stream_own_queue().context("bystander stream")?;
    let cal = kernel::calibrate(&k, &dev, &stream, &gpu_device::setup::calibration_points(kernel_ms), 3)
        .context("calibrating the kernel length")?
        .calibration;
    let slots = kernel::slot_buffer(&dev, &stream, 1).context("slot buffer")?;
    let label = format!(
        "hip:{index} ({}), delay kernel {}x{}",
        dev.info.name, grid.blocks, grid.threads
    );
    Ok((
        Load::Gpu(Box::new(GpuLoad {
            stream,
            slots,
            k,
            ticks: cal.ticks_for(kernel_ms),
            _dev: dev,
        })),
        label,
    ))
}

/// Runs the worker; `Err` is one line for stderr (exit status 1).
pub fn main(o: &BystanderWorkerOptions) -> Result<(), Error> {
    let kernel_ns = crate::num::round_u64(o.kernel_us * 1e3);
    let (load, label) = match o.device {
        d if d.is_host() => (Load::Host { ns: kernel_ns }, "host (CPU spin)".to_string()),
        DeviceSpec::Hip(i) => gpu_load(i, o.kernel_us / 1e3)?,
        _ => return Err(Error::msg("the bystander worker needs --device host or hip:N")),
    };
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            stop.store(true, Ordering::SeqCst);
        });
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let w = |out: &mut dyn Write, l: &Line| writeln!(out, "{}", l.to_json()).context("stdout");
    w(
        &mut out,
        &Line::Ready {
            device: label,
            kernel_ns,
            pid: std::process::id(),
        },
    )?;
    out.flush().context("stdout")?;
    let deadline = now_ns().saturating_add(o.max_duration_ms.saturating_mul(1_000_000));
    let mut n = 0u64;
    let reason = loop {
        if stop.load(Ordering::SeqCst) {
            break "stdin closed";
        }
        if now_ns() >= deadline {
            break "--max-duration-ms reached";
        }
        let start_ns = now_ns();
        load.one()?;
        let end_ns = now_ns();
        w(&mut out, &Line::Kernel { start_ns, end_ns })?;
        n += 1;
    };
    w(
        &mut out,
        &Line::Done {
            kernels: n,
            stopped_ns: now_ns(),
            reason: reason.into(),
        },
    )?;
    out.flush().context("stdout")
}
