//! The stand-in's `hipError_t` numbers and priority range against the HIP header Debian
//! installs: a C file of static assertions generated from the Rust constants, compiled with cc.
use hip_standin::code::NAMES;
use std::process::Command;

#[test]
fn error_codes_match_the_installed_hip_header() {
    let mut c = String::from("#define __HIP_PLATFORM_AMD__ 1\n#include <hip/hip_runtime_api.h>\n");
    for (code, name) in NAMES {
        c.push_str(&format!("_Static_assert({name} == {code}, \"{name}\");\n"));
    }
    c.push_str("int main(void) { return 0; }\n");
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("standin_codes.c");
    std::fs::write(&src, c).unwrap();
    let out = Command::new("cc")
        .args(["-fsyntax-only", "-x", "c"])
        .arg(&src)
        .output()
        .expect("cc runs");
    assert!(
        out.status.success(),
        "the stand-in's codes disagree with hip_runtime_api.h (or the header is missing: scripts/install-deps.sh build installs libamdhip64-dev):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
