use super::*;
use proptest::prelude::*;

const HEADER: &str = "\u{1e}{\"qlog_format\":\"JSON-SEQ\",\"qlog_version\":\"0.3\",\"trace\":{\"vantage_point\":{\"name\":\"ngtcp2\",\"type\":\"client\"},\"common_fields\":{\"protocol_type\":[\"QUIC\"],\"time_format\":\"relative\",\"reference_time\":0,\"group_id\":\"0A6381F53ABDC01F\"}}}\n";

fn packet(time: u64, dir: &str, kind: &str, frames: &str) -> String {
    format!(
        "\u{1e}{{\"time\":{time},\"name\":\"transport:packet_{dir}\",\"data\":{{\"frames\":[{frames}],\"header\":{{\"packet_type\":\"{kind}\",\"packet_number\":0}},\"raw\":{{\"length\":1200}}}}}}\n"
    )
}

fn stream(id: u64, offset: u64, length: u64, fin: bool) -> String {
    format!("{{\"frame_type\":\"stream\",\"stream_id\":{id},\"offset\":{offset},\"length\":{length},\"fin\":{fin}}}")
}

#[test]
fn a_connection_in_order() {
    let mut q = HEADER.to_string();
    q += &packet(
        0,
        "sent",
        "initial",
        "{\"frame_type\":\"crypto\",\"offset\":0,\"length\":371},{\"frame_type\":\"padding\"}",
    );
    q += "\u{1e}{\"time\":0,\"name\":\"recovery:metrics_updated\",\"data\":{\"smoothed_rtt\":333}}\n";
    q += &packet(
        201,
        "received",
        "initial",
        "{\"frame_type\":\"crypto\",\"offset\":0,\"length\":90}",
    );
    q += &packet(
        202,
        "sent",
        "handshake",
        "{\"frame_type\":\"crypto\",\"offset\":0,\"length\":36}",
    );
    q += &packet(202, "sent", "1RTT", &stream(0, 0, 40, true));
    q += &packet(404, "received", "1RTT", &stream(0, 0, 1000, false));
    q += &packet(405, "received", "1RTT", &stream(0, 1000, 500, true));
    let c = parse(&q).unwrap();
    assert_eq!(c.odcid.as_deref(), Some("0a6381f53abdc01f"));
    assert_eq!(c.first_sent_ms, Some(0.0));
    assert_eq!(c.first_received_ms, Some(201.0));
    assert_eq!(c.handshake_ms, Some(202.0));
    let s = &c.streams[&0];
    assert_eq!(s.first_sent_ms, Some(202.0));
    assert_eq!(s.first_received_ms, Some(404.0));
    assert_eq!(s.done_ms, Some(405.0));
    assert_eq!(s.received, 1500);
}

/// The FIN arrives before a lost frame's retransmission: done is when the hole is filled.
#[test]
fn done_waits_for_the_last_hole() {
    let mut q = HEADER.to_string();
    q += &packet(10, "received", "1RTT", &stream(4, 0, 100, false));
    q += &packet(11, "received", "1RTT", &stream(4, 200, 50, true));
    q += &packet(12, "received", "1RTT", &stream(4, 0, 100, false));
    let c = parse(&q).unwrap();
    assert_eq!(c.streams[&4].done_ms, None);
    let mut q2 = q.clone();
    q2 += &packet(30, "received", "1RTT", &stream(4, 100, 100, false));
    q2 += &packet(31, "received", "1RTT", &stream(4, 150, 100, true));
    let c = parse(&q2).unwrap();
    assert_eq!(c.streams[&4].done_ms, Some(30.0));
    assert_eq!(c.streams[&4].received, 250);
    assert_eq!(c.streams[&4].have.len(), 1);
}

#[test]
fn an_empty_fin_ends_an_empty_stream() {
    let q = HEADER.to_string() + &packet(7, "received", "1RTT", &stream(8, 0, 0, true));
    assert_eq!(parse(&q).unwrap().streams[&8].done_ms, Some(7.0));
}

#[test]
fn refusals() {
    assert_eq!(parse(""), Err(QlogError::NoHeader));
    assert_eq!(parse("\u{1e}[1]\n"), Err(QlogError::NoHeader));
    let cut = HEADER.to_string() + &packet(3, "sent", "initial", "") + "\u{1e}{\"time\":\n";
    assert_eq!(parse(&cut).unwrap().first_sent_ms, Some(3.0));
    let bad = HEADER.to_string() + "\u{1e}{\"time\": x}\n" + &packet(3, "sent", "initial", "");
    assert!(matches!(parse(&bad), Err(QlogError::Bad { record: 2, .. })));
    let negative = HEADER.to_string() + &packet(0, "sent", "1RTT", "").replace("0,", "-1,");
    assert!(matches!(parse(&negative), Err(QlogError::Bad { .. })));
    let wraps = HEADER.to_string() + &packet(1, "received", "1RTT", &stream(0, u64::MAX, 2, false));
    assert!(matches!(parse(&wraps), Err(QlogError::Overflow { .. })));
}

proptest! {
    #[test]
    fn any_text_is_a_value_or_an_error(s in "(\u{1e}|\n|\\{|\\}|\"[a-z_:]{0,12}\"|:|,|\\[|\\]|[0-9]{1,20}|true|-)*") {
        let _ = parse(&(HEADER.to_string() + &s));
        let _ = parse(&s);
    }

    /// However a stream's bytes arrive (out of order, duplicated, the FIN before a hole is
    /// filled), it is done exactly when every byte before the FIN is in, and `received`
    /// counts each byte once.
    #[test]
    fn coverage_matches_a_bitmap(
        before in prop::collection::vec((0u64..64, 0u64..16), 0..30),
        after in prop::collection::vec((0u64..64, 0u64..16), 0..30),
        fin_len in 0u64..64,
        tail in 0u64..16,
    ) {
        let tail = tail.min(fin_len);
        let fin = (fin_len - tail, tail);
        let mut q = HEADER.to_string();
        let mut bitmap = [false; 80];
        let mut want_done = None;
        let all = before.iter().map(|f| (*f, false)).chain(std::iter::once((fin, true))).chain(after.iter().map(|f| (*f, false)));
        let mut seen_fin = false;
        for (t, ((off, len), is_fin)) in all.enumerate() {
            q += &packet(t as u64, "received", "1RTT", &stream(0, off, len, is_fin));
            bitmap[off as usize..(off + len) as usize].iter_mut().for_each(|b| *b = true);
            seen_fin |= is_fin;
            if seen_fin && want_done.is_none() && bitmap[..fin_len as usize].iter().all(|b| *b) {
                want_done = Some(t as f64);
            }
        }
        let c = parse(&q).unwrap();
        let s = &c.streams[&0];
        prop_assert_eq!(s.done_ms, want_done);
        prop_assert_eq!(s.received, bitmap.iter().filter(|b| **b).count() as u64);
    }
}
