//! The search for a library already in the process ([`find`]): a fake library (built with `cc`)
//! stands in for the runtime another library loaded first.
use super::*;
use crate::testing::FakeLibrary;

const SYMBOL: &str = "hip_rt_fake_symbol";

fn soname(tag: &str) -> String {
    format!("libhiprtfake{tag}{}.so.6", std::process::id())
}

/// A probe loads nothing: a library on disk that nobody loaded is not found, and is still not
/// loaded after being probed (by its soname or its path).
#[test]
fn the_probe_loads_nothing() {
    let so = soname("idle");
    let Some(fake) = FakeLibrary::build("idle", "libfake.so", &so, &[SYMBOL]) else {
        return;
    };
    for _ in 0..2 {
        assert!(already_loaded(&so).is_none(), "{so} found before anyone loaded it");
        assert!(already_loaded(&fake.path_str()).is_none(), "{} found", fake.path_str());
    }
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    assert!(!maps.contains(&fake.path_str()), "the probe mapped {}", fake.path_str());
}

/// Loaded first by someone else (as PyTorch loads its libamdhip64), the library is found by its
/// soname before any candidate is opened, with its file and why; a name not loaded is skipped.
#[test]
fn a_library_already_loaded_wins_over_the_candidates() {
    let so = soname("loaded");
    let Some(theirs) = FakeLibrary::build("loaded", "libtheirs.so", &so, &[SYMBOL]) else {
        return;
    };
    let Some(ours) = FakeLibrary::build("candidate", "libours.so", &soname("candidate"), &[SYMBOL]) else {
        return;
    };
    let search = Search {
        in_process: vec![
            format!("libhiprtfake-not-loaded{}.so.7", std::process::id()),
            so.clone(),
        ],
        open: vec![ours.path_str()],
    };
    let (_, path, why) = find("libfake", &search, SYMBOL).expect("the candidate opens");
    assert_eq!(
        (path.as_str(), &why),
        (
            ours.path_str().as_str(),
            &Origin::Opened {
                candidate: ours.path_str()
            }
        ),
        "nothing loaded yet: the candidate"
    );
    // Someone else loads theirs (by path, from their own directory).
    // SAFETY: the fake library has no initializers; it is never unloaded (ManuallyDrop).
    let _theirs = ManuallyDrop::new(unsafe { Library::new(&theirs.path) }.expect("loading the fake library"));
    let (_, path, why) = find("libfake", &search, SYMBOL).expect("found");
    assert_eq!(path, theirs.path_str(), "the loaded library's own file");
    assert_eq!(why, Origin::InProcess { probe: so });
}

/// With nothing loaded and no candidate that opens: every candidate tried, and said.
#[test]
fn nothing_loaded_nothing_found_names_every_candidate() {
    let search = Search {
        in_process: vec![format!("libhiprtfake-none{}.so.6", std::process::id())],
        open: vec!["/nonexistent/libfake.so.6".into()],
    };
    match find("libfake", &search, SYMBOL) {
        Err(HipError::LibraryNotFound { library, tried }) => {
            assert_eq!(library, "libfake");
            assert_eq!(tried.len(), 1);
            assert_eq!(tried[0].0, "/nonexistent/libfake.so.6");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok((_, p, _)) => panic!("found {p}"),
    }
}
