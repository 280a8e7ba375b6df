//! Where the host device's worker program is when the caller does not say: the
//! `$PREEMPT_HOST_WORKER` variable, else host-device's `preempt-host-worker` beside this library
//! (or in `../libexec/preempt-kfd/` from it, where `scripts/install-capi.sh` puts it), else beside
//! the executable. The library's own file is found in `/proc/self/maps` by the address of one of
//! its functions (a static link finds the executable itself).
use preempt_api::host::{WORKER_ENV, WORKER_NAME};
use preempt_api::{Error, Result, WorkerExe};
use std::path::{Path, PathBuf};

/// The file mapped at `addr` in this process, from `/proc/self/maps`.
fn mapped_file(maps: &str, addr: usize) -> Option<PathBuf> {
    maps.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (lo, hi) = f.next()?.split_once('-')?;
        let (lo, hi) = (usize::from_str_radix(lo, 16).ok()?, usize::from_str_radix(hi, 16).ok()?);
        let path = f.nth(4)?;
        (lo <= addr && addr < hi && path.starts_with('/')).then(|| PathBuf::from(path))
    })
}

/// The default worker program; `addr` is the address of a function of this library.
pub fn default_worker(addr: usize) -> Result<WorkerExe> {
    let lib = std::fs::read_to_string("/proc/self/maps")
        .ok()
        .and_then(|m| mapped_file(&m, addr));
    let exe = std::env::current_exe().ok();
    let dirs = [lib, exe]
        .into_iter()
        .flatten()
        .filter_map(|p| p.parent().map(Path::to_path_buf))
        .flat_map(|d| {
            let libexec = d.join("../libexec/preempt-kfd");
            [d, libexec]
        });
    WorkerExe::find(dirs).ok_or_else(|| {
        Error::new(
            preempt_api::ErrorKind::InvalidArgument,
            format!(
                "no host worker program: no {WORKER_NAME} beside libpreempt_kfd or the executable; set {WORKER_ENV}, or \
                 preempt_options.host_worker (a program may serve as its own worker: see \
                 preempt_host_worker_main)"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mapping_that_holds_the_address_names_the_file() {
        let maps = "\
55d0c0000000-55d0c0001000 r--p 00000000 fd:01 123 /usr/bin/prog
7f0000000000-7f0000100000 r-xp 00001000 fd:01 456 /opt/lib/libpreempt_kfd.so
7f0000100000-7f0000200000 rw-p 00000000 00:00 0
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]";
        assert_eq!(
            mapped_file(maps, 0x7f00_0000_1234),
            Some(PathBuf::from("/opt/lib/libpreempt_kfd.so"))
        );
        assert_eq!(mapped_file(maps, 0x7f00_0010_0000), None, "anonymous");
        assert_eq!(mapped_file(maps, 0x7ffd_0000_0010), None, "[stack] is not a file");
        assert_eq!(mapped_file(maps, 0x1000), None);
    }
}
