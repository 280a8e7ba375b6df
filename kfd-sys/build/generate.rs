//! Generates the KFD uapi bindings from a real `kfd_ioctl.h` (feature `bindgen` only).
//!
//! Header search (first match of each kind, then the newest KFD minor wins):
//! 1. `KFD_IOCTL_H=/path/to/kfd_ioctl.h` — an explicit override, used alone when set
//!    (a `make headers_install` tree, or a patched kernel's header);
//! 2. ROCm's libhsakmt copy: `$ROCM_PATH/include/hsakmt/linux/`, `/opt/rocm/include/hsakmt/linux/`,
//!    `/usr/include/hsakmt/linux/`;
//! 3. the system uapi header: `/usr/include/linux/kfd_ioctl.h`.
//!
//! The bindgen invocation is pinned here (options below) so that the output only changes with
//! the header: `scripts/check-kfd-sys-bindings.sh` regenerates `src/bindings.rs` from the pinned
//! 6.12 header with it and fails on any difference. Ioctl request numbers are taken from the header itself via
//! `clang_macro_fallback` and cross-checked in `src/lib.rs` at compile time.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};

/// The debugger API (RUNTIME_ENABLE, DBG_TRAP) arrived in KFD 1.13 (Linux 6.5).
const MIN_MINOR: u32 = 13;

struct Candidate {
    path: PathBuf,
    major: u32,
    minor: u32,
}

fn parse_version(text: &str, name: &str) -> Option<u32> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        match (it.next(), it.next(), it.next()) {
            (Some("#define"), Some(n), Some(v)) if n == name => v.parse().ok(),
            _ => None,
        }
    })
}

fn candidate(path: PathBuf) -> Option<Candidate> {
    let text = fs::read_to_string(&path).ok()?;
    let major = parse_version(&text, "KFD_IOCTL_MAJOR_VERSION")?;
    let minor = parse_version(&text, "KFD_IOCTL_MINOR_VERSION")?;
    Some(Candidate { path, major, minor })
}

fn search() -> Vec<Candidate> {
    if let Some(p) = env::var_os("KFD_IOCTL_H") {
        let p = PathBuf::from(p);
        match candidate(p.clone()) {
            Some(c) => return vec![c],
            None => panic!(
                "KFD_IOCTL_H={} is not a readable kfd_ioctl.h with KFD_IOCTL_{{MAJOR,MINOR}}_VERSION",
                p.display()
            ),
        }
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(r) = env::var_os("ROCM_PATH") {
        dirs.push(Path::new(&r).join("include/hsakmt/linux"));
    }
    dirs.push("/opt/rocm/include/hsakmt/linux".into());
    dirs.push("/usr/include/hsakmt/linux".into());
    dirs.push("/usr/include/linux".into());
    dirs.into_iter()
        .filter_map(|d| candidate(d.join("kfd_ioctl.h")))
        .collect()
}

pub fn run() {
    println!("cargo:rerun-if-env-changed=KFD_IOCTL_H");
    println!("cargo:rerun-if-env-changed=ROCM_PATH");
    let found = search();
    for c in &found {
        println!("cargo:rerun-if-changed={}", c.path.display());
    }
    // Newest minor wins; on a tie the earlier (more specific) location wins.
    let Some(best) = found
        .iter()
        .enumerate()
        .max_by_key(|(i, c)| (c.major, c.minor, std::cmp::Reverse(*i)))
        .map(|(_, c)| c)
    else {
        panic!(
            "\n\nkfd-sys: no kfd_ioctl.h found (looked at $KFD_IOCTL_H, $ROCM_PATH/include/hsakmt/linux, \
             /opt/rocm/include/hsakmt/linux, /usr/include/hsakmt/linux, /usr/include/linux).\n\
             On Debian 12: scripts/install-deps.sh build (linux-libc-dev 6.12 from bookworm-backports).\n"
        );
    };
    if best.major != 1 || best.minor < MIN_MINOR {
        panic!(
            "\n\nkfd-sys: the newest kfd_ioctl.h found is {} with KFD ioctl {}.{}; this toolkit needs >= 1.{} \
             (the debugger API: RUNTIME_ENABLE, DBG_TRAP; Linux >= 6.5).\n\
             Debian 12's own linux-libc-dev (6.1) carries 1.11. Get a newer header with\n  \
             scripts/install-deps.sh build   (installs linux-libc-dev 6.12 from bookworm-backports)\n\
             or point KFD_IOCTL_H at a `make headers_install` tree: KFD_IOCTL_H=/tmp/hdr/include/linux/kfd_ioctl.h\n",
            best.path.display(),
            best.major,
            best.minor,
            MIN_MINOR
        );
    }

    // The project's patched header (patches/) defines the preempt ioctls: src/preempt.rs then
    // proves its hand-written copy equal to the header's definitions.
    let has_preempt = fs::read_to_string(&best.path)
        .map(|t| {
            t.lines()
                .any(|l| l.trim_start().starts_with("#define AMDKFD_IOC_PREEMPT_QUEUES"))
        })
        .unwrap_or(false);
    if has_preempt {
        println!("cargo:rustc-cfg=kfd_has_preempt");
    }

    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    // <drm/drm.h> and <linux/types.h>: from a headers_install tree next to the header if there
    // is one (…/include/linux/kfd_ioctl.h -> …/include), else from the system.
    let inc_root = best.path.parent().and_then(Path::parent).map(Path::to_path_buf);
    let mut builder = bindgen::Builder::default()
        .header(best.path.to_string_lossy())
        .clang_arg("-D__user=")
        .allowlist_item("(kfd|KFD|AMDKFD|HSA_CAP)_.*")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .use_core()
        .derive_default(true)
        .derive_debug(true)
        .layout_tests(true)
        .generate_comments(false)
        .clang_macro_fallback()
        .clang_macro_fallback_build_dir(&out)
        .rust_edition(bindgen::RustEdition::Edition2024)
        .wrap_unsafe_ops(true);
    // kfd_sysfs.h (the topology's HSA_CAP_* bits): beside kfd_ioctl.h in uapi trees, else the
    // system's copy (ROCm's hsakmt directory may carry kfd_ioctl.h alone).
    let sysfs_h = [
        best.path.with_file_name("kfd_sysfs.h"),
        PathBuf::from("/usr/include/linux/kfd_sysfs.h"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .unwrap_or_else(|| {
        panic!(
            "kfd-sys: no kfd_sysfs.h beside {} nor in /usr/include/linux (linux-libc-dev >= 5.x has it)",
            best.path.display()
        )
    });
    println!("cargo:rerun-if-changed={}", sysfs_h.display());
    builder = builder.header(sysfs_h.to_string_lossy());
    // A raw kernel-source uapi tree (…/include/uapi, e.g. the patched kernel's own header) is
    // not usable as an include root: its linux/stddef.h wants kernel-internal headers. Its
    // kfd_ioctl.h needs only <drm/drm.h> and <linux/ioctl.h>: the system's serve.
    let raw_uapi = inc_root.as_ref().is_some_and(|r| r.ends_with("include/uapi"));
    if let Some(root) = inc_root.as_ref().filter(|r| !raw_uapi && r.join("drm/drm.h").exists()) {
        builder = builder.clang_arg(format!("-I{}", root.display()));
    }
    let bindings = builder
        .generate()
        .unwrap_or_else(|e| panic!("kfd-sys: bindgen failed on {}: {e}", best.path.display()));
    let source = format!(
        "a kfd_ioctl.h with KFD ioctl {}.{}{}",
        best.major,
        best.minor,
        if has_preempt {
            " and the patched preempt ioctls"
        } else {
            ""
        }
    );
    // The first lines name what was generated from what, without a path (nothing of the build
    // machine ends up in the crate): the committed src/bindings.rs starts with the same lines.
    let text = format!(
        "// @generated by kfd-sys/build/generate.rs (feature `bindgen`) from {source} and kfd_sysfs.h.\n\
         // Do not edit. Regenerate: scripts/check-kfd-sys-bindings.sh --update\n\n{}",
        bindings
    );
    fs::write(out.join("kfd_ioctl.rs"), text).expect("write bindings");
    let meta = format!(
        "/// What the bindings were generated from (at build time: feature `bindgen`).\n\
         pub const KFD_HEADER_SOURCE: &str = {:?};\n",
        format!("generated at build time from {source}")
    );
    fs::write(out.join("header_meta.rs"), meta).expect("write header_meta.rs");
}
