//! kfd-sys's build script.
//!
//! A normal build generates nothing: the bindings are committed (`src/bindings.rs`, generated from
//! the pinned Linux 6.12 uapi header), so building needs neither libclang nor a kfd_ioctl.h. With
//! the `bindgen` feature the bindings are generated here from a header instead (a patched kernel's
//! header, ROCm's copy, or the system's): see `build/generate.rs`.
fn main() {
    // Set by the generator when the header defines the patched preempt ioctls (src/preempt.rs).
    println!("cargo::rustc-check-cfg=cfg(kfd_has_preempt)");
    #[cfg(feature = "bindgen")]
    generate::run();
}

#[cfg(feature = "bindgen")]
#[path = "build/generate.rs"]
mod generate;
