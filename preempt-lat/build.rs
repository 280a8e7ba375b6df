//! Records the git revision the binary was built from, for the environment in every output.
fn main() {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let rev = git(&["describe", "--always", "--dirty", "--abbrev=12"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=PREEMPT_GIT_REV={rev}");
    // Rerun when HEAD or the index moves, wherever git keeps them (a worktree's .git is a file
    // naming another directory). Without git (a source tarball) only this script's own change
    // reruns it: naming a file that does not exist would rebuild the crate on every build.
    println!("cargo:rerun-if-changed=build.rs");
    for f in ["HEAD", "index"] {
        if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", f])
            && std::path::Path::new(&p).exists()
        {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}
