use super::*;
use crate::acceptance::summary::{DeviceRun, StageRecord};
use serde_json::json;

/// An acceptance run's directory as `acceptance` leaves it (a summary, one stage with a run
/// result), archived under `dir`.
fn archive(dir: &Path, node: &str, device: &str, status: Status, p99_ns: u64) -> PathBuf {
    let name = format!("acceptance-{node}-x");
    let top = dir.join(&name);
    let stage_dir = top.join("d/06-latency-lv3-sigstop");
    std::fs::create_dir_all(&stage_dir).unwrap();
    let run = json!({
        "params": {"level": 3, "t_ms": 0.5},
        "env": {"device": device, "mechanism": "sigstop", "kernel": "k", "gfx_target": null, "git_revision": "r"},
        "latency_ns": {"suspend": {"p50": 1, "p99": p99_ns, "max": p99_ns, "count": 9}, "hp_start": {"p99": 2}},
        "correctness": {"ok": true},
    });
    std::fs::write(stage_dir.join("run.json"), run.to_string()).unwrap();
    let stage = StageRecord {
        status,
        results: vec!["d/06-latency-lv3-sigstop/run.json".into()],
        ..StageRecord::skipped("latency-lv3-sigstop", "t", 1.0, &[], format!("{node} said why"))
    };
    let mut s = Summary {
        tool: TOOL.into(),
        version: "v".into(),
        git_revision: "r".into(),
        node: node.into(),
        started_utc: "2026-01-01T00:00:00Z".into(),
        quick: true,
        command: vec![],
        interrupted: false,
        devices: vec![DeviceRun {
            device: device.into(),
            host_figures: device == "host",
            dir: "d".into(),
            stages: vec![
                StageRecord {
                    status: Status::Pass,
                    ..StageRecord::skipped("environment", "e", 1.0, &[], "ok".into())
                },
                stage,
            ],
            targets: vec![Judged::not_measured("lv3-p99", "sigstop", format!("{node}: none"))],
        }],
        passed: 0,
        failed: 0,
        skipped: 0,
        ok: false,
        gated: false,
        failed_targets: Vec::new(),
        archive: String::new(),
    };
    s.tally();
    std::fs::write(top.join("summary.json"), serde_json::to_string(&s).unwrap()).unwrap();
    let dest = dir.join(format!("{name}.tar.gz"));
    archive::write(&top, &name, &dest).unwrap();
    std::fs::remove_dir_all(&top).unwrap();
    dest
}

#[test]
fn archives_of_several_nodes_make_one_table_and_their_results_join_the_rows() {
    let d = std::env::temp_dir().join(format!("preempt-lat-fleet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    let fleet_dir = d.join("fleet");
    std::fs::create_dir_all(&fleet_dir).unwrap();
    archive(&fleet_dir, "node-a", "host", Status::Pass, 30_000);
    archive(&fleet_dir, "node-b", "hip:3", Status::Fail, 0);
    // Not an acceptance archive: listed as skipped, with the reason.
    let other = d.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("x.json"), "{}").unwrap();
    archive::write(&other, "other", &fleet_dir.join("other.tar.gz")).unwrap();
    let plain = d.join("plain.json");
    let f = read(&[fleet_dir.clone(), plain.clone()]).unwrap();
    assert_eq!(f.files, [plain], "plain files are left to report");
    let who: Vec<(&str, &str)> = f.runs.iter().map(|r| (r.node.as_str(), r.device.as_str())).collect();
    assert_eq!(who, [("node-a", "host"), ("node-b", "hip:3")]);
    assert_eq!(f.results.len(), 2, "each archive's listed result");
    assert!(
        f.results[0]
            .0
            .ends_with("acceptance-node-a-x/d/06-latency-lv3-sigstop/run.json")
    );
    assert!(
        f.skipped
            .iter()
            .any(|(n, why)| n.ends_with("other.tar.gz") && why.contains("no acceptance summary"))
    );
    let mut out = Vec::new();
    f.text(&mut out).unwrap();
    let t = String::from_utf8(out).unwrap();
    assert!(t.contains("2 node/device run(s) from 2 archive(s)"), "{t}");
    assert!(t.contains("node-a  host (host)"), "{t}");
    assert!(t.contains("node-b hip:3 latency-lv3-sigstop: node-b said why"), "{t}");
    std::fs::create_dir_all(d.join("out")).unwrap();
    let ok = f.finish(&d.join("out"), Format::Json, &mut Vec::new()).unwrap();
    assert!(!ok, "node-b failed a stage");
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("out/report-acceptance.json")).unwrap()).unwrap();
    assert_eq!(written.as_array().map(Vec::len), Some(2));
    // The summary's columns with the GPU and the archive after the device.
    let a = |node: &str| {
        fleet_dir
            .join(format!("acceptance-{node}-x.tar.gz"))
            .display()
            .to_string()
    };
    assert_eq!(
        std::fs::read_to_string(d.join("out/report-acceptance.csv")).unwrap(),
        format!(
            "node,device,gpu,archive,kind,id,scope,status,seconds,measured,host_figures,reason\n\
             node-a,host,-,{a},stage,environment,,PASS,0.0,,true,ok\n\
             node-a,host,-,{a},stage,latency-lv3-sigstop,,PASS,0.0,,true,node-a said why\n\
             node-a,host,-,{a},target,lv3-p99,sigstop,N/A,,-,false,node-a: none\n\
             node-b,hip:3,-,{b},stage,environment,,PASS,0.0,,false,ok\n\
             node-b,hip:3,-,{b},stage,latency-lv3-sigstop,,FAIL,0.0,,false,node-b said why\n\
             node-b,hip:3,-,{b},target,lv3-p99,sigstop,N/A,,-,false,node-b: none\n",
            a = a("node-a"),
            b = a("node-b")
        )
    );
    // A directory without an archive is bad input.
    assert!(matches!(read(&[other]), Err(Failure::Usage(m)) if m.contains("holds none")));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn columns_put_each_stage_where_it_sits_in_its_runs() {
    let host = ["environment", "sr-sigstop", "lat-sigstop", "kernel-log"]
        .map(String::from)
        .to_vec();
    let gpu = ["environment", "smoke", "sr-a", "sr-b", "lat-a", "lat-b", "kernel-log"]
        .map(String::from)
        .to_vec();
    let c = columns([host, gpu].into_iter());
    assert_eq!(c.first().map(String::as_str), Some("environment"));
    assert_eq!(c.last().map(String::as_str), Some("kernel-log"));
    let at = |id: &str| c.iter().position(|x| x == id).unwrap();
    assert!(
        at("smoke") < at("sr-sigstop") && at("sr-sigstop") < at("lat-b"),
        "{c:?}"
    );
}
