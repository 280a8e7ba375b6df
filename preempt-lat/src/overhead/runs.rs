//! The runs every setup is made of, on a device opened once ([`SharedDevice`]): the native run
//! (straight onto the device, no launcher, no session), the scheduled run through an
//! application-API session, and the threshold sweep's point, which is a native run against a
//! scheduled Lv1 run of the same work.
use super::{Measured, Setup};
use crate::error::{Context, Error, failed};
use crate::measure::settle::wait_stream_or_stop;
use crate::options::{Level, OverheadOptions};
use lv1::cost::Usage;
use preempt_api::{Options, SharedDevice};

/// The LP work of a setup: `commands` delay commands of `t_ms`, through a launcher of
/// `threshold` / `batch` where the setup has one.
#[derive(Debug, Clone, Copy)]
pub struct Work {
    pub t_ms: f64,
    pub commands: u32,
    pub threshold: u32,
    pub batch: u32,
}

impl Work {
    pub(super) fn of(o: &OverheadOptions) -> Self {
        Work {
            t_ms: o.t_ms,
            commands: o.commands,
            threshold: o.common.lv1.threshold,
            batch: o.common.lv1.batch,
        }
    }
}

/// `commands` delay commands of `t_ms` launched straight onto `src` with no launcher and no
/// session (`overhead`'s native run; the threshold sweep's direct phase), on the host device
/// with `workers` workers, on a GPU with the device its sessions share. Returns what this
/// process used meanwhile and whether every command completed exactly once.
pub fn native(src: &SharedDevice, t_ms: f64, commands: u32, workers: u32) -> Result<(Usage, bool), Error> {
    match (src.gpu(), src.worker()) {
        (Some(gpu), _) => crate::gpu::overhead::native(gpu, t_ms, commands),
        (None, Some(exe)) => crate::host_direct::native(exe, t_ms, commands, workers),
        (None, None) => Err(failed!("{}: no native run on this device", src.spec())),
    }
}

/// One scheduled run: a session (Lv1, Lv2: no Lv3 mechanism built; Lv3: the mechanism armed), one
/// LP stream at `level` (Lv3, Lv2: registered with the helper, never entered), the commands
/// submitted and waited for. Returns what was measured and how the stream would be suspended.
pub(super) fn scheduled(src: &SharedDevice, o: &Work, level: Level, workers: u32) -> Result<(Measured, String), Error> {
    let lv1 = lv1::Config::new(o.threshold as usize, o.batch as usize)?;
    let session = src
        .session(Options {
            lv1,
            no_lv3: level != Level::Lv3,
            host_workers: workers as usize,
            gpu_slots: o.commands as usize,
            ..Options::default()
        })
        .with_context(|| format!("{} session", Setup::Scheduled(level).name()))?;
    let measured = (|| -> Result<(Measured, String), Error> {
        let what = Setup::Scheduled(level).name();
        if level == Level::Lv3 && !session.has_lv3() {
            return Err(failed!(
                "lv3: no Lv3 mechanism here ({}); --levels 1 measures Lv1 alone",
                session.mechanism().why
            ));
        }
        let lp = session
            .create_lp_stream(level)
            .with_context(|| format!("{what}: LP stream"))?;
        if level != Level::Lv1 {
            session
                .helper_register(&lp, 0)
                .with_context(|| format!("{what}: registering with the helper"))?;
        }
        let t_ns = crate::num::round_u64(o.t_ms * 1e6);
        let usage = || Usage::now().context("getrusage");
        let before = usage()?;
        for _ in 0..o.commands {
            lp.submit_delay(t_ns).with_context(|| format!("{what}: submit"))?;
        }
        // Up to --commands x T: a stop ends the wait (the close below ends the work).
        wait_stream_or_stop(&lp).with_context(|| format!("{what}: waiting"))?;
        let used = usage()?.since(&before);
        let check = lp.check().with_context(|| format!("{what}: checking"))?;
        let mechanism = match level {
            Level::Lv3 => session.mechanism().name.clone().unwrap_or_else(|| "none".into()),
            Level::Lv2 => preempt_api::Mechanism::Lv2Hold.name().into(),
            _ => preempt_api::Lv1Suspend::Stop.name().into(),
        };
        Ok((Measured::of(used, check.ok()), mechanism))
    })();
    // Bounded (docs/c-api.md#close): after a stop, what it abandons is this measurement's, which
    // is left out anyway.
    let closed = session.close();
    let m = measured?;
    closed.context("closing the session")?;
    Ok(m)
}

/// The threshold sweep's point (Fig. 11c): `w` native (straight onto the device) and through
/// the launcher at Lv1 of an application-API session, as `overhead` runs them. Returns (native
/// s, launcher s, overhead %). Both must run every command exactly once. A batch above the
/// threshold launches as the threshold allows.
#[allow(clippy::cast_precision_loss)] // ns of one run: far below 2^53
pub fn lv1_point(src: &SharedDevice, w: Work, workers: u32) -> Result<(f64, f64, f64), Error> {
    let w = Work {
        batch: w.batch.min(w.threshold),
        ..w
    };
    let (native, once) = native(src, w.t_ms, w.commands, workers)?;
    if !once {
        return Err(failed!(
            "lv1 overhead (direct): some LP command did not run exactly once"
        ));
    }
    let (launcher, _) = scheduled(src, &w, Level::Lv1, workers)?;
    if !launcher.exactly_once {
        return Err(failed!(
            "lv1 overhead (launcher): some LP command did not run exactly once"
        ));
    }
    let (direct_s, launcher_s) = (native.wall_ns as f64 / 1e9, launcher.wall_ns as f64 / 1e9);
    Ok((direct_s, launcher_s, (launcher_s / direct_s - 1.0) * 100.0))
}
