//! Doctor's text output, for people.
use super::Report;
use super::facts::Fact;
use std::io::{Result, Write};

fn show<T>(f: &Fact<T>, ok: impl Fn(&T) -> String) -> String {
    match f {
        Fact::Ok(v) => ok(v),
        Fact::Err { error } => format!("unavailable: {error}"),
    }
}

fn opt(v: Option<i32>) -> String {
    v.map_or_else(|| "absent".to_string(), |x| x.to_string())
}

pub fn text(r: &Report, w: &mut dyn Write) -> Result<()> {
    let f = &r.facts;
    writeln!(w, "preempt-lat doctor {}", r.version)?;
    writeln!(w, "kernel:          {}", show(&f.kernel, |k| k.release.clone()))?;
    writeln!(
        w,
        "/dev/kfd:        {}",
        if f.kfd_device_present { "present" } else { "absent" }
    )?;
    writeln!(
        w,
        "KFD ioctl:       {}",
        show(&f.kfd_version, |v| format!("{v} (opened)"))
    )?;
    writeln!(w, "built against:   {} (KFD {})", f.header.source, f.header.kfd_version)?;
    if let Some(p) = &f.preempt_ioctl {
        writeln!(w, "preempt ioctl:   {}", p.detail)?;
    }
    writeln!(
        w,
        "amdgpu params:   {}",
        show(&f.amdgpu_params, |p| {
            if p.sched_policy.is_none() && p.cwsr_enable.is_none() {
                "amdgpu module not loaded (no /sys/module/amdgpu/parameters)".to_string()
            } else {
                format!(
                    "cwsr_enable={} sched_policy={} queue_preemption_timeout_ms={} mes={} hws_max_conc_proc={}",
                    opt(p.cwsr_enable),
                    opt(p.sched_policy),
                    opt(p.queue_preemption_timeout_ms),
                    opt(p.mes),
                    opt(p.hws_max_conc_proc)
                )
            }
        })
    )?;
    match &f.nodes {
        Fact::Err { error } => writeln!(w, "topology:        unavailable: {error}")?,
        Fact::Ok(nodes) => {
            writeln!(
                w,
                "topology:        {} node(s), {} GPU(s)",
                nodes.len(),
                f.gpu_nodes().len()
            )?;
            if let Some(n) = preempt_api::gpu::multi_gpu_note_here(f.gpu_nodes().len()) {
                writeln!(w, "  note: {n}")?;
            }
            for n in nodes.iter().filter(|n| n.gpu_id != 0) {
                writeln!(
                    w,
                    "  node {} gpu_id {} {} {} CUs x{} XCC, CWSR {:.1} MiB/queue, trap debug {} (firmware {}), renderD{}",
                    n.index,
                    n.gpu_id,
                    n.gfx_target.as_deref().unwrap_or("unknown-gfx"),
                    n.cu_count,
                    n.num_xcc,
                    n.save_area_bytes as f64 / (1 << 20) as f64,
                    yes(n.capability.trap_debug_support),
                    yes(n.capability.trap_debug_firmware_supported),
                    n.drm_render_minor
                )?;
            }
        }
    }
    writeln!(
        w,
        "HIP runtime:     {}",
        show(&f.hip, |h| format!(
            "{} (runtime {}), devices: {}; {}",
            h.library,
            h.runtime_version,
            show(&h.devices, |n| n.to_string()),
            h.origin
        ))
    )?;
    writeln!(w, "levels:")?;
    for l in &r.levels {
        let mark = if l.available { "yes" } else { "no " };
        writeln!(
            w,
            "  {mark} {:<5} Lv{} {:<19} {}",
            l.device, l.level, l.mechanism, l.reason
        )?;
    }
    writeln!(w, "summary: {}", r.summary)
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
