//! `qbench compete`: flows share one emulated bottleneck (root, as CI runs).

use crate::common;

use common::needs::{require, Need};

#[test]
fn flows_share_a_bottleneck() {
    require!(Need::Link);
    let out = common::qbench(&[
        "compete",
        "--flows",
        "h3:1,h2:1",
        "--objects",
        "1x1MB",
        "--link",
        "rate=20mbit,rtt=10ms",
    ]);
    let stderr = out.stderr;
    assert_eq!(out.code, Some(0), "{stderr}");
    let j = out.json.unwrap();
    assert_eq!(j["schema"], "qbench.compete-report");
    let flows = j["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2);
    let mut goodputs = Vec::new();
    for f in flows {
        assert_eq!(f["report"]["runs"][0]["payload_bytes"], 1_000_000);
        assert_eq!(f["report"]["complete"], true);
        let samples = f["throughput"].as_array().unwrap();
        assert!(!samples.is_empty());
        let times: Vec<f64> = samples.iter().map(|s| s[0].as_f64().unwrap()).collect();
        assert!(times.windows(2).all(|w| w[1] > w[0]), "time goes forward");
        assert!(samples.iter().all(|s| s[1].as_f64().unwrap() >= 0.0));
        goodputs.push(f["goodput_bps"].as_f64().unwrap());
    }
    // Each flow's goodput is measured over its own transfer, so the sum may exceed the rate
    // once one finishes early; each alone cannot.
    assert!(flows
        .iter()
        .all(|f| f["goodput_bps"].as_f64().unwrap() <= 20e6));
    assert!(goodputs.iter().all(|g| *g > 0.0), "{goodputs:?}");
    // Jain's index of exactly these goodputs.
    let (sum, squares): (f64, f64) = (goodputs.iter().sum(), goodputs.iter().map(|g| g * g).sum());
    let want = sum * sum / (goodputs.len() as f64 * squares);
    let jain = j["jain_index"].as_f64().unwrap();
    assert!((jain - want).abs() < 1e-9, "{jain} vs {want}");
    assert!(jain > 0.5, "{jain}");
    assert!(stderr.contains("Jain's index"));
}

#[test]
fn competitions_need_a_link_and_two_flows() {
    for (args, needle) in [
        (&["compete", "--flows", "h3:1,h2:1"][..], "--link"),
        (
            &["compete", "--flows", "h3:1", "--link", "rate=10mbit"][..],
            "--flows",
        ),
        (
            &["compete", "--flows", "h4:1", "--link", "rate=10mbit"][..],
            "--flows",
        ),
    ] {
        let out = common::qbench_plain(args);
        assert_ne!(out.code, Some(0));
        let err = out.stderr;
        assert!(
            err.lines().next().unwrap_or("").contains(needle),
            "{args:?}: {err}"
        );
    }
}
