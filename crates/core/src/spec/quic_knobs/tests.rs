use super::*;

#[test]
fn every_key_parses_and_prints_back() {
    let text = "ack-frequency=10,ack-delay=5ms,gso=off,gro=off,mtu-discovery=off,\
                max-udp-payload=1452,initial-mtu=1300,initial-rtt=50ms,send-window=16MB,\
                rcvbuf=106496B,sndbuf=4194304B";
    let k: QuicKnobs = text.parse().unwrap();
    assert_eq!(k.ack_frequency, Some(10));
    assert_eq!(k.ack_delay, Some(Duration::from_millis(5)));
    assert_eq!(
        (k.gso, k.gro, k.mtu_discovery),
        (Some(false), Some(false), Some(false))
    );
    assert_eq!((k.max_udp_payload, k.initial_mtu), (Some(1452), Some(1300)));
    assert_eq!(k.initial_rtt, Some(Duration::from_millis(50)));
    assert_eq!(k.send_window, Some(ByteSize(16_000_000)));
    assert_eq!(k.rcvbuf, Some(ByteSize(106_496)));
    assert_eq!(k.sndbuf, Some(ByteSize(4 << 20)));
    assert_eq!(k.to_string(), text);
    assert_eq!("".parse::<QuicKnobs>().unwrap(), QuicKnobs::default());
    assert_eq!("stock".parse::<QuicKnobs>().unwrap(), QuicKnobs::default());
    assert!(QuicKnobs::default().is_empty());
}

#[test]
fn json_names_the_units_and_leaves_unset_keys_out() {
    let k: QuicKnobs = "ack-frequency=4,ack-delay=2ms,initial-rtt=1s"
        .parse()
        .unwrap();
    let j = serde_json::to_value(k).unwrap();
    assert_eq!(
        j,
        serde_json::json!({"ack_frequency": 4, "ack_delay_us": 2000, "initial_rtt_us": 1_000_000})
    );
    assert_eq!(serde_json::from_value::<QuicKnobs>(j).unwrap(), k);
    assert_eq!(serde_json::to_string(&QuicKnobs::default()).unwrap(), "{}");
}

#[test]
fn bad_values_name_their_key() {
    for (text, key) in [
        ("ack-frequency=0", "ack-frequency"),
        ("ack-frequency=1001", "ack-frequency"),
        ("ack-frequency=x", "ack-frequency"),
        ("ack-delay=5ms", "ack-delay"),
        ("ack-frequency=2,ack-delay=2s", "ack-delay"),
        ("gso=maybe", "gso"),
        ("gro=1", "gro"),
        ("mtu-discovery=yes", "mtu-discovery"),
        ("max-udp-payload=1199", "max-udp-payload"),
        ("max-udp-payload=65528", "max-udp-payload"),
        ("initial-mtu=1400,max-udp-payload=1300", "initial-mtu"),
        ("initial-rtt=0s", "initial-rtt"),
        ("initial-rtt=11s", "initial-rtt"),
        ("initial-rtt=100500ns", "initial-rtt"),
        ("initial-mtu=1500", "initial-mtu"),
        ("send-window=10", "send-window"),
        ("send-window=2TiB", "send-window"),
        ("rcvbuf=4095", "rcvbuf"),
        ("rcvbuf=2GiB", "rcvbuf"),
        ("sndbuf=1KiB", "sndbuf"),
        ("gso=on,gso=off", "gso"),
        ("pacing=off", "pacing"),
        ("gso", "gso"),
    ] {
        let e = text.parse::<QuicKnobs>().unwrap_err().to_string();
        assert!(e.starts_with(&format!("`{key}")), "{text}: {e}");
    }
}

#[test]
fn keys_parse_apart_from_how_they_go_together() {
    let base = QuicKnobs::parse_keys("ack-delay=25ms").unwrap();
    assert!(base.check().is_err());
    let k = base.overlaid(&"ack-frequency=10".parse().unwrap());
    assert_eq!(k.to_string(), "ack-frequency=10,ack-delay=25ms");
    assert!(k.check().is_ok());
    assert!("initial-mtu=1500,max-udp-payload=1500"
        .parse::<QuicKnobs>()
        .is_ok());
}

#[test]
fn an_axis_value_overrides_its_base_key_by_key() {
    let base: QuicKnobs = "gso=off,ack-frequency=2".parse().unwrap();
    let axis: QuicKnobs = "ack-frequency=20".parse().unwrap();
    assert_eq!(base.overlaid(&axis).to_string(), "ack-frequency=20,gso=off");
    assert_eq!(base.overlaid(&QuicKnobs::default()), base);
}

#[test]
fn stats_per_run_are_differences_and_connections_add_up() {
    let first = QuicStats {
        tx_datagrams: 10,
        tx_calls: 5,
        rx_datagrams: 100,
        gro: Some(true),
        acks_sent: 50,
        acks_received: 3,
        ack_frequency_sent: 1,
        ack_frequency_received: 1,
        mtu: 1200,
        rtt_us: 300,
    };
    let later = QuicStats {
        tx_datagrams: 30,
        rx_datagrams: 300,
        acks_sent: 60,
        mtu: 1452,
        rtt_us: 200,
        ..first
    };
    let d = later.since(&first);
    assert_eq!(
        (d.tx_datagrams, d.tx_calls, d.rx_datagrams, d.acks_sent),
        (20, 0, 200, 10)
    );
    assert_eq!((d.mtu, d.rtt_us), (1452, 200));
    let mut sum = first;
    sum.add(&d);
    assert_eq!(
        (sum.tx_datagrams, sum.acks_sent, sum.mtu, sum.rtt_us),
        (30, 60, 1452, 300)
    );
}

proptest::proptest! {
    /// Any text gives settings or an error, never a panic; what parses prints back to the
    /// same settings.
    #[test]
    fn any_text_parses_or_is_refused(s in "\\PC{0,80}") {
        if let Ok(k) = s.parse::<QuicKnobs>() {
            proptest::prop_assert_eq!(k.to_string().parse::<QuicKnobs>().unwrap(), k);
        }
    }

    #[test]
    fn knob_shaped_text_round_trips(
        keys in proptest::collection::vec(
            proptest::sample::select(vec![
                "ack-frequency", "ack-delay", "gso", "gro", "mtu-discovery",
                "max-udp-payload", "initial-mtu", "initial-rtt", "send-window", "rcvbuf",
                "sndbuf", "bogus",
            ]),
            0..6,
        ),
        values in proptest::collection::vec(
            proptest::sample::select(vec![
                "0", "1", "2", "10", "1000", "1200", "1452", "65527", "70000", "on", "off",
                "5ms", "250us", "2s", "16MB", "1KiB", "4KiB", "106496", "1GiB", "", "x",
            ]),
            6,
        ),
    ) {
        let text: Vec<String> =
            keys.iter().zip(&values).map(|(k, v)| format!("{k}={v}")).collect();
        if let Ok(k) = text.join(",").parse::<QuicKnobs>() {
            proptest::prop_assert!(k.check().is_ok());
            proptest::prop_assert_eq!(k.to_string().parse::<QuicKnobs>().unwrap(), k);
        }
    }
}
