//! The summary's lines about the emulated link: how calibration judged it, and which
//! emulator carried the run.

use qbench_core::report::calibration::LinkCheck;

/// How calibration judged the link: the fields that missed are named (their warnings said
/// why when they were found).
pub(super) fn calibration_line(c: &qbench_core::report::calibration::Calibration) -> String {
    let missed: Vec<&str> = c.misses().map(|k| k.field.as_str()).collect();
    let unmeasurable: Vec<&LinkCheck> = c.unmeasurable().collect();
    let fields = c.checks.len() - unmeasurable.len();
    let rtt = if c.rtt.samples > 0 {
        format!("median RTT {:.2} ms", c.rtt.p50_us as f64 / 1e3)
    } else {
        "no RTT measured".to_string()
    };
    let mut line = if missed.is_empty() {
        let which = if unmeasurable.is_empty() {
            ""
        } else {
            "measurable "
        };
        format!("all {fields} {which}fields within tolerance")
    } else {
        format!(
            "{} of {fields} fields MISSED: {}",
            missed.len(),
            missed.join(", ")
        )
    };
    if let Some(first) = unmeasurable.first() {
        let names: Vec<&str> = unmeasurable.iter().map(|k| k.field.as_str()).collect();
        line.push_str(&format!(
            "; NOT MEASURABLE: {} ({})",
            names.join(", "),
            first.note.as_deref().unwrap_or("no probe crossed the link")
        ));
    }
    let repeated: Vec<String> = [("up", &c.up), ("down", &c.down)]
        .iter()
        .filter_map(|(dir, m)| {
            let n = m.flood.as_ref()?.missed_before.len();
            (n > 0).then(|| format!("{dir}.rate took {} floods", n + 1))
        })
        .collect();
    let again = if repeated.is_empty() {
        String::new()
    } else {
        format!("; {}", repeated.join(", "))
    };
    format!("{line} ({rtt}; link.calibration){again}")
}

/// Which emulator carried the run: the two differ in how they reorder and where they drop.
pub(super) fn link_line(b: qbench_core::report::link::Backend) -> String {
    use qbench_core::report::link::Backend;
    match b {
        Backend::Netem => "emulated by netem (tbf + netem on the router)".into(),
        Backend::Userspace => {
            "emulated by tbf + nftables + the userspace delay path (no netem)".into()
        }
        Backend::Edt => {
            "emulated by departure times (a tc BPF program + sch_fq on the router, nftables for loss)".into()
        }
    }
}
