//! `qbench-shaper check`'s table: each field asked against measured, then what the probe and
//! the flows saw.

use qbench_core::report::calibration::{Calibration, DirectionMeasured};
use qbench_core::units::Rate;

fn flows(dir: &str, m: &DirectionMeasured) -> Option<String> {
    let f = m.flood.as_ref()?;
    Some(format!(
        "{dir} flow: offered {} ({} packets of {} B), {} arrived at {}",
        Rate(f.sent_bps),
        f.sent_packets,
        f.packet_bytes,
        f.received_packets,
        Rate(f.received_bps)
    ))
}

pub fn table(c: &Calibration) -> String {
    let head = ["field", "asked", "measured", "tolerance", ""];
    let rows: Vec<[String; 5]> = c
        .checks
        .iter()
        .map(|k| {
            [
                k.field.clone(),
                k.asked.clone(),
                k.measured.clone(),
                k.tolerance.clone(),
                match (&k.note, k.ok) {
                    (Some(n), true) => format!("ok ({n})"),
                    (None, true) => "ok".into(),
                    (n, false) if k.unmeasurable => {
                        format!("NOT MEASURABLE: {}", n.as_deref().unwrap_or(""))
                    }
                    (Some(n), false) => format!("MISS: {n}"),
                    (None, false) => "MISS".into(),
                },
            ]
        })
        .collect();
    let mut width = head.map(str::len);
    for r in &rows {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 5]| {
        let mut s = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  ", w = width[i]));
            }
        }
        s.trim_end().to_string()
    };
    let mut out = vec![line(head)];
    out.extend(
        rows.iter()
            .map(|r| line([&r[0], &r[1], &r[2], &r[3], &r[4]])),
    );
    out.push(format!(
        "echo probe: {} round trips, min {:.2} / median {:.2} / p99 {:.2} / max {:.2} ms",
        c.rtt.samples,
        c.rtt.min_us as f64 / 1e3,
        c.rtt.p50_us as f64 / 1e3,
        c.rtt.p99_us as f64 / 1e3,
        c.rtt.max_us as f64 / 1e3
    ));
    out.extend(flows("up", &c.up));
    out.extend(flows("down", &c.down));
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use qbench_core::report::calibration::{judge, DirectionMeasured, Flood, RttSummary};
    use qbench_core::spec::link::LinkSpec;

    use super::*;

    #[test]
    fn the_table_names_each_field_and_its_verdict() {
        let spec: LinkSpec = "rate=10mbit,rtt=20ms".parse().unwrap();
        let m = DirectionMeasured {
            probe_sent: 1000,
            probe_received: 1000,
            reordered: 0,
            flood: Some(Flood {
                packet_bytes: 1514,
                sent_packets: 619,
                sent_bps: 12_500_000,
                received_packets: 500,
                received_bps: 7_000_000,
                trace: None,
                missed_before: Vec::new(),
            }),
        };
        let rtt = RttSummary::of(vec![20_100; 1000]);
        let c = Calibration {
            checks: judge(&spec, &m, &m, &rtt),
            rtt,
            up: m.clone(),
            down: m,
            elapsed_ms: 2000,
        };
        let t = table(&c);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("field"));
        let rate = lines.iter().find(|l| l.starts_with("up.rate")).unwrap();
        assert!(
            rate.contains("10.00 Mbit/s") && rate.contains("7.00 Mbit/s") && rate.ends_with("MISS")
        );
        assert!(lines
            .iter()
            .any(|l| l.starts_with("rtt") && l.ends_with("ok")));
        assert!(t.contains(
            "up flow: offered 12.50 Mbit/s (619 packets of 1514 B), 500 arrived at 7.00 Mbit/s"
        ));
    }
}
