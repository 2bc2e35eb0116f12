//! Scenario parsing, expansion and hashing.

use super::*;

/// A bad axis value (in these files, on line 4) is named with its line first.
fn axis_line(bad: &str) -> &'static str {
    ["", "line 4: axes."][usize::from(bad.contains("[axes]"))]
}

const FIG6: &str = r#"
name = "imc17-fig6a-small"
[base]
protos = "h2,h3"
rounds = 10
link = "queue=50ms"
[axes]
rate = ["5mbit", "100mbit"]
objects = ["1x5KB", "1x10MB"]
"#;

#[test]
fn cell_counts_are_checked_not_wrapped() {
    let axis = |name: &str, f: &dyn Fn(usize) -> String| {
        let v: Vec<String> = (0..256).map(|i| format!("\"{}\"", f(i))).collect();
        format!("{name} = [{}]\n", v.join(", "))
    };
    let mut text = "name = \"huge\"\n[base]\nprotos = \"h2,h3\"\n[axes]\n".to_string();
    text += &axis("rate", &|i| format!("{}kbit", 8 + i));
    text += &axis("rtt", &|i| format!("{}ms", 1 + i));
    text += &axis("loss", &|i| format!("{}%", i % 50));
    text += &axis("jitter", &|i| format!("{i}ms"));
    text += &axis("objects", &|i| format!("{}x1KB", 1 + i));
    text += &axis("cc", &|i| ["cubic", "bbr"][i % 2].to_string());
    text += &axis("flows", &|i| format!("h2:{}", 1 + i % 3));
    text += &format!(
        "b_cwnd_cap = [{}]\n",
        (1..=256)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let s = Scenario::parse(&text).unwrap();
    let e = s.cells().unwrap_err();
    assert!(matches!(e, ScenarioError::TooMany(None)), "{e}");
    assert!(e.to_string().contains("2^64 or more"), "{e}");
    let small = Scenario::parse(&text.replace("b_cwnd_cap", "# b_cwnd_cap")).unwrap();
    assert!(matches!(
        small.cells(),
        Err(ScenarioError::TooMany(Some(_)))
    ));
}

#[test]
fn expands_the_matrix_in_order() {
    let s = Scenario::parse(FIG6).unwrap();
    let cells = s.cells().unwrap();
    let order: Vec<String> = cells
        .iter()
        .map(|c| format!("{} {}", c.params["rate"], c.params["objects"]))
        .collect();
    assert_eq!(
        order,
        [
            "5mbit 1x5KB",
            "5mbit 1x10MB",
            "100mbit 1x5KB",
            "100mbit 1x10MB"
        ]
    );
    let c = cells[3].spec.as_compare().expect("a compare cell");
    assert_eq!(c.protos, (Protocol::H2, Protocol::H3));
    assert_eq!(c.rounds, 10);
    assert_eq!(c.base.objects.as_ref().unwrap().to_string(), "1x10MB");
    assert_eq!(
        c.base.link.as_ref().unwrap().text,
        "queue=50ms,rate=100mbit"
    );
    let mut hashes: Vec<&str> = cells.iter().map(|c| c.hash.as_str()).collect();
    hashes.sort_unstable();
    hashes.dedup();
    assert_eq!(hashes.len(), 4, "every cell has its own hash");
}

/// The hash is over the typed spec's serialized form alone: no flag name enters it, so
/// renaming a command-line flag cannot change it. The value is pinned so that a change
/// to the spec's serialized form (which does invalidate finished cells) is seen here.
#[test]
fn cell_hash_is_the_spec_and_nothing_else() {
    let cells = Scenario::parse(FIG6).unwrap().cells().unwrap();
    let c = &cells[0];
    assert_eq!(c.hash, c.spec.hash());
    let canonical = serde_json::to_vec(&c.spec).unwrap();
    assert_eq!(c.hash, hex(&Sha256::digest(&canonical)));
    let round_trip: CellSpec = serde_json::from_slice(&canonical).unwrap();
    assert_eq!(round_trip.hash(), c.hash);
    assert_eq!(
        c.hash,
        "8c9d021bbdcc7b23c91025a60557f138ab67c853a92b728b7c03950b9d3aad2d"
    );
}

#[test]
fn unknown_fields_name_field_and_line() {
    let err = Scenario::parse("name = \"x\"\n[base]\nprotos = \"h2,h3\"\nbandwidth = 1\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("bandwidth") && err.contains("line 4"), "{err}");
    // A chain printer (anyhow's `{:#}`) shows toml's message once: no source repeats it.
    let err = Scenario::parse("name = \"x\"\n[base]\n[axes]\nthreads = [-1]\n").unwrap_err();
    let mut chain = vec![err.to_string()];
    let mut source = std::error::Error::source(&err);
    while let Some(s) = source {
        chain.push(s.to_string());
        source = s.source();
    }
    let joined = chain.join(": ");
    assert_eq!(joined.matches("line 4, column 12").count(), 1, "{joined}");
    assert!(
        joined.contains("4 | threads = [-1]\n  |            ^^"),
        "{joined}"
    );
    let err = Scenario::parse("name = \"x\"\n[base]\n[axes]\nrate = []\n").unwrap();
    assert!(matches!(err.cells(), Err(ScenarioError::EmptyAxis("rate"))));
}

#[test]
fn bad_values_name_their_field() {
    for (toml, want) in [
        (
            "[base]\nprotos = \"h2,h4\"",
            "protos: `h4` is not h1, h2 or h3",
        ),
        ("[base]\nprotos = \"h2\"", "protos: `h2`: give exactly two"),
        ("[base]\ncc = \"vegas\"", "cc: `vegas` is not cubic"),
        ("[base]\nobjects = \"5x\"", "objects:"),
        ("[base]\nlink = \"rate=fast\"", "link:"),
        ("[base]\ntimeout = \"10\"", "base.timeout:"),
        (
            "kind = \"compete\"\n[base]\nflows = \"h3:0\"",
            "flows: `h3:0`",
        ),
        ("kind = \"compete\"\n[base]", "flows: a competition needs"),
    ] {
        let s = Scenario::parse(&format!("name = \"x\"\n{toml}\n")).unwrap();
        let err = s.cells().unwrap_err().to_string();
        assert!(err.starts_with(want), "{toml}: {err}");
    }
}

#[test]
fn compete_cells() {
    let s = Scenario::parse("name=\"f\"\nkind=\"compete\"\n[base]\nrounds=3\nobjects=\"1x1MB\"\nlink=\"rate=5mbit\"\n[axes]\nflows=[\"h3:1,h2:1\",\"h3:1,h2:2\"]\n").unwrap();
    let cells = s.cells().unwrap();
    assert_eq!(cells.len(), 2);
    let c = cells[1].spec.as_compete().expect("a compete cell");
    assert_eq!(c.flows, vec![(Protocol::H3, 1), (Protocol::H2, 2)]);
    assert!(c.base.link.is_some());
}

#[test]
fn zero_rtt_and_cap_axes_set_their_fields() {
    let s = Scenario::parse(
        "name=\"x\"\n[base]\nproto=\"h3\"\n[axes]\nzero_rtt=[false,true]\nb_cwnd_cap=[430,2000]\n",
    )
    .unwrap();
    let cells = s.cells().unwrap();
    assert_eq!(cells.len(), 4);
    let spec = |i: usize| cells[i].spec.as_compare().expect("a compare cell").clone();
    // The last axis varies fastest.
    assert_eq!(spec(0).b.cwnd_cap, Some(430));
    assert!(!spec(0).base.zero_rtt && !spec(0).base.resume);
    assert!(spec(1).base.zero_rtt && spec(1).base.resume);
    assert_eq!(spec(2).b.cwnd_cap, Some(2000));
    assert_eq!(spec(0).protos, (Protocol::H3, Protocol::H3));
}

#[test]
fn held_loads_and_request_rate_axis() {
    let s = Scenario::parse(
        "name=\"tail\"\n[base]\nprotos=\"h2,h3\"\nduration=\"10s\"\nwarmup=\"2s\"\narrivals=\"poisson\"\nmetric=\"p999\"\nlink=\"rate=100mbit,rtt=40ms\"\n[axes]\nrequest_rate=[\"1k\",\"5k\",\"20k\"]\n",
    )
    .unwrap();
    assert_eq!(s.metric(), Some(Metric::P999));
    let cells = s.cells().unwrap();
    assert_eq!(cells.len(), 3);
    let load = |i: usize| {
        cells[i]
            .spec
            .as_compare()
            .unwrap()
            .base
            .load
            .clone()
            .unwrap()
    };
    assert_eq!(load(0).rate, Some(1000.0));
    assert_eq!(load(2).rate, Some(20000.0));
    assert_eq!(load(1).duration, std::time::Duration::from_secs(10));
    assert_eq!(load(1).warmup, std::time::Duration::from_secs(2));
    assert_eq!(load(1).arrivals, Arrivals::Poisson);
    assert_eq!(load(1).max_inflight, DEFAULT_MAX_INFLIGHT);
    assert_eq!(cells[0].params["request_rate"], "1k");
    // The metric judges; it does not change what runs, so it is not in the hash.
    let other = Scenario::parse(
        "name=\"tail\"\n[base]\nprotos=\"h2,h3\"\nduration=\"10s\"\nwarmup=\"2s\"\narrivals=\"poisson\"\nmetric=\"p50\"\nlink=\"rate=100mbit,rtt=40ms\"\n[axes]\nrequest_rate=[\"1k\",\"5k\",\"20k\"]\n",
    )
    .unwrap();
    assert_eq!(other.cells().unwrap()[0].hash, cells[0].hash);
}

#[test]
fn bad_loads_name_their_field() {
    for (toml, want) in [
        ("warmup = \"1s\"", "base.warmup: needs base.duration"),
        ("request_rate = \"1k\"", "request_rate: needs base.duration"),
        (
            "duration = \"10s\"\nmax_inflight = 5",
            "base.max_inflight: needs request_rate",
        ),
        ("duration = \"10\"", "base.duration:"),
        (
            "duration = \"0s\"",
            "base.duration: must be greater than zero",
        ),
        ("duration = \"1s\"\nwarmup = \"1s\"", "base.warmup:"),
        (
            "duration = \"1s\"\nrequest_rate = \"0\"",
            "request_rate: `0`",
        ),
        (
            "duration = \"1s\"\nrequest_rate = \"1k\"\nmax_inflight = 0",
            "base.max_inflight: must be at least 1",
        ),
        (
            "duration = \"1s\"\nmetric = \"plt\"",
            "base.metric: a held load",
        ),
    ] {
        let s = Scenario::parse(&format!(
            "name = \"x\"\n[base]\nprotos = \"h2,h3\"\n{toml}\n"
        ))
        .unwrap();
        let err = s.cells().unwrap_err().to_string();
        assert!(err.starts_with(want), "{toml}: {err}");
    }
    let err = Scenario::parse("name = \"x\"\n[base]\nmetric = \"p95\"\n").unwrap_err();
    assert!(err.to_string().contains("p95"), "{err}");
}

#[test]
fn auto_rounds_and_the_test() {
    let s = Scenario::parse(
        "name = \"x\"\n[base]\nprotos = \"h2,h3\"\nrounds = \"auto\"\nmax_rounds = 30\nprecision = \"1.5%\"\ntest = \"mann-whitney\"\n",
    )
    .unwrap();
    assert_eq!(s.test(), crate::stats::effect::Test::MannWhitney);
    let CellSpec::Compare(c) = &s.cells().unwrap()[0].spec else {
        panic!("a comparison")
    };
    assert_eq!(c.rounds, 30);
    assert_eq!(
        c.auto_rounds,
        Some(AutoRounds {
            min: 5,
            max: 30,
            precision_pct: 1.5
        })
    );
    // Without either: 10 rounds, judged by `qbench compare`'s default test, and the hash of a
    // fixed-rounds cell is unchanged by the new optional field.
    let old = Scenario::parse(FIG6).unwrap();
    assert_eq!(old.test(), crate::stats::effect::DEFAULT_TEST);
    let cell = &old.cells().unwrap()[0];
    let CellSpec::Compare(c) = &cell.spec else {
        panic!("a comparison")
    };
    assert_eq!((c.rounds, c.auto_rounds), (10, None));
    assert!(!serde_json::to_string(&cell.spec)
        .unwrap()
        .contains("auto_rounds"));
}

#[test]
fn bad_rounds_name_their_field() {
    for (toml, want) in [
        ("rounds = 1", "base.rounds: at least 2"),
        ("rounds = \"many\"", "base.rounds: `many`"),
        (
            "min_rounds = 5",
            "base.min_rounds: only with rounds = \"auto\"",
        ),
        (
            "rounds = 4\nprecision = \"2%\"",
            "base.precision: only with",
        ),
        (
            "rounds = \"auto\"\nmin_rounds = 1",
            "base.min_rounds: at least 2",
        ),
        (
            "rounds = \"auto\"\nmin_rounds = 9\nmax_rounds = 3",
            "base.max_rounds: at least min_rounds",
        ),
        (
            "rounds = \"auto\"\nprecision = \"0\"",
            "base.precision: `0`",
        ),
    ] {
        let s = Scenario::parse(&format!(
            "name = \"x\"\n[base]\nprotos = \"h2,h3\"\n{toml}\n"
        ))
        .unwrap();
        let err = s.cells().unwrap_err().to_string();
        assert!(err.starts_with(want), "{toml}: {err}");
    }
    let err = Scenario::parse("name = \"x\"\n[base]\ntest = \"student\"\n").unwrap_err();
    assert!(err.to_string().contains("student"), "{err}");
}

#[test]
fn reorder_threshold_axis_sets_both_sides() {
    let s = Scenario::parse(
        "name = \"x\"\n[base]\nprotos = \"h2,h3\"\nlink = \"rtt=112ms,jitter=10ms\"\n[axes]\nreorder_threshold = [3, 100]\n",
    )
    .unwrap();
    let got: Vec<Option<u32>> = s
        .cells()
        .unwrap()
        .iter()
        .map(|c| match &c.spec {
            CellSpec::Compare(c) => c.base.reorder_threshold,
            CellSpec::Compete(_) => None,
        })
        .collect();
    assert_eq!(got, vec![Some(3), Some(100)]);
    for bad in [
        "[base]\nreorder_threshold = 0",
        "[base]\n[axes]\nreorder_threshold = [1001]",
    ] {
        let s = Scenario::parse(&format!("name = \"x\"\n{bad}\n")).unwrap();
        let err = s.cells().unwrap_err().to_string();
        let at = axis_line(bad);
        assert!(
            err.starts_with(at) && err.contains("reorder_threshold: 1 to 1000"),
            "{err}"
        );
    }
    let s = Scenario::parse("name = \"x\"\n[base]\nreorder_time_threshold = 0.5\n").unwrap();
    let err = s.cells().unwrap_err().to_string();
    assert!(
        err.starts_with("base.reorder_time_threshold: `0.5`"),
        "{err}"
    );
    let s = Scenario::parse("name = \"x\"\n[base]\nreorder_time_threshold = 4.0\n").unwrap();
    let CellSpec::Compare(c) = &s.cells().unwrap()[0].spec else {
        panic!("a comparison")
    };
    assert_eq!(c.base.reorder_time_threshold, Some(4.0));
}

#[test]
fn client_cpu_axis_and_side_quota() {
    let s = Scenario::parse(
        "name = \"x\"\n[base]\nprotos = \"h3,h2\"\nclient_cpuset = \"0\"\n[base.b]\nclient_cpu = \"none\"\n[axes]\nclient_cpu = [\"none\", 0.25, \"0.1\"]\n",
    )
    .unwrap();
    let cells = s.cells().unwrap();
    let got: Vec<(Option<f64>, Option<f64>)> = cells
        .iter()
        .map(|c| {
            let (a, b) = c.spec.as_compare().unwrap().sides();
            assert_eq!(a.client_cpuset.map(|s| s.to_string()).as_deref(), Some("0"));
            (a.client_cpu, b.client_cpu)
        })
        .collect();
    assert_eq!(
        got,
        vec![(None, None), (Some(0.25), None), (Some(0.1), None)]
    );
    let labels: Vec<String> = cells.iter().map(Cell::label).collect();
    assert_eq!(
        labels,
        ["client_cpu=none", "client_cpu=0.25", "client_cpu=0.1"]
    );
    // A cell without a quota hashes as it did before the field existed.
    let plain = Scenario::parse("name = \"x\"\n[base]\nprotos = \"h3,h2\"\n").unwrap();
    let without = Scenario::parse(
        "name = \"x\"\n[base]\nprotos = \"h3,h2\"\n[axes]\nclient_cpu = [\"none\"]\n",
    )
    .unwrap();
    assert_eq!(
        plain.cells().unwrap()[0].hash,
        without.cells().unwrap()[0].hash
    );
    for bad in [
        "[axes]\nclient_cpu = [0]",
        "[axes]\nclient_cpu = [\"half\"]",
        "[base]\nclient_cpu = -1",
        "[base.a]\nclient_cpu = true",
    ] {
        let err = Scenario::parse(&format!("name = \"x\"\n{bad}\n")).unwrap_err();
        assert!(err.to_string().contains("client_cpu"), "{bad}: {err}");
    }
    let s = Scenario::parse("name = \"x\"\n[base]\nclient_cpuset = \"2-1\"\n").unwrap();
    let err = s.cells().unwrap_err().to_string();
    assert!(err.starts_with("base.client_cpuset: `2-1`"), "{err}");
}

#[test]
fn two_segments_and_a_proxy_per_side() {
    let s = Scenario::parse(
        "name = \"x\"\n[base]\nprotos = \"h2,h3\"\nlink = \"rtt=40ms\"\nlink_b = \"rtt=40ms\"\n[base.a]\nproxy = \"h2\"\n[axes]\nloss = [\"0%\", \"1%\"]\n",
    )
    .unwrap();
    let cells = s.cells().unwrap();
    assert_eq!(cells.len(), 2);
    let (a, b) = cells[1].spec.as_compare().unwrap().sides();
    assert_eq!(a.proxy, Some(Protocol::H2));
    assert_eq!(b.proxy, None);
    // The link axes go to the client's segment; the server's stays as written.
    assert!(a.link.as_ref().unwrap().text.contains("loss=1%"));
    assert_eq!(a.link_b.as_ref().unwrap().text, "rtt=40ms");
    assert_eq!(
        cells[1].spec.as_compare().unwrap().labels().0,
        "h2 proxy=h2"
    );
    for (bad, want) in [
        (
            "[base]\nproxy = \"h3\"\nlink = \"rtt=1ms\"",
            "base.proxy: runs on the middle host",
        ),
        (
            "[base]\nlink_b = \"rtt=1ms\"",
            "base.link_b: needs base.link",
        ),
        (
            "[base]\nlink = \"rtt=1ms\"\nlink_b = \"rtt=oops\"",
            "base.link_b:",
        ),
    ] {
        let s = Scenario::parse(&format!("name = \"x\"\n{bad}\n")).unwrap();
        let err = s.cells().unwrap_err().to_string();
        assert!(err.starts_with(want), "{bad}: {err}");
    }
    let err = Scenario::parse("name = \"x\"\n[base.b]\nproxy = \"h1\"\n").unwrap_err();
    assert!(err.to_string().contains("proxy"), "{err}");
}

proptest::proptest! {
    #[test]
    fn scenario_parser_never_panics(text in "\\PC{0,200}") {
        if let Ok(s) = Scenario::parse(&text) {
            let _ = s.cells();
        }
    }

    /// The scaling axes with any counts and any link text: cells or an error naming the field.
    #[test]
    fn scaling_axes_never_panic(
        conns in proptest::collection::vec(proptest::num::u32::ANY, 1..4),
        threads in proptest::collection::vec(proptest::num::u32::ANY, 1..4),
        link in "[a-z0-9=.,%/ ]{0,30}",
    ) {
        let text = format!(
            "name = \"x\"\n[base]\n[axes]\nconnections = {conns:?}\nthreads = {threads:?}\nlink = [{link:?}]\n"
        );
        let s = Scenario::parse(&text).expect("the file is well formed");
        if let Err(e) = s.cells() {
            let e = e.to_string();
            proptest::prop_assert!(
                ["connections", "threads", "link", "axes", "line "].iter().any(|f| e.starts_with(f)),
                "{e}"
            );
        }
    }
}

/// Axis values that make one experiment (given twice, or spelled two ways) would run once but
/// count twice in the false discovery rate: refused, naming both cells.
#[test]
fn the_same_experiment_twice_is_refused() {
    for objects in [r#"["1x1KB", "1x1KB"]"#, r#"["1x1KB", "1000B"]"#] {
        let text = FIG6.replace(r#"["1x5KB", "1x10MB"]"#, objects);
        let e = Scenario::parse(&text)
            .unwrap()
            .cells()
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("axes: cells `"), "{e}");
        assert!(e.contains("are the same experiment"), "{e}");
    }
}

/// The scaling axes: connections, and the client's and server's threads together, on
/// loopback or across a named link.
#[test]
fn connections_threads_and_link_axes() {
    let s = Scenario::parse(
        "name = \"x\"\n[base]\nprotos = \"h2,h3\"\nserver_threads = 3\n[axes]\nlink = [\"none\", \"mtu=1500\"]\nconnections = [1, 4]\nthreads = [2]\n",
    )
    .unwrap();
    let cells = s.cells().unwrap();
    let got: Vec<(u32, u32, u32, bool)> = cells
        .iter()
        .map(|c| {
            let b = &c.spec.as_compare().unwrap().base;
            (
                b.connections,
                b.client_threads,
                b.server_threads,
                b.link.is_some(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (1, 2, 2, false),
            (1, 2, 2, true),
            (4, 2, 2, false),
            (4, 2, 2, true)
        ]
    );
    assert_eq!(cells[1].params["link"], "mtu=1500");
    // Without the threads axis, the base's figures hold, 1 where absent.
    let s = Scenario::parse("name = \"x\"\n[base]\nserver_threads = 3\n").unwrap();
    let b = &s.cells().unwrap()[0]
        .spec
        .as_compare()
        .unwrap()
        .base
        .clone();
    assert_eq!((b.client_threads, b.server_threads), (1, 3));
    for (bad, want) in [
        ("[base]\n[axes]\nthreads = [0]", "threads: 1 to 256"),
        ("[base]\n[axes]\nthreads = [257]", "threads: 1 to 256"),
        (
            "[base]\nclient_threads = 0",
            "base.client_threads: 1 to 256",
        ),
        (
            "[base]\n[axes]\nconnections = [0]",
            "connections: 1 to 25000",
        ),
        ("[base]\nconnections = 25001", "connections: 1 to 25000"),
        (
            "[base]\n[axes]\nlink = [\"none\"]\nrate = [\"1gbit\"]",
            "link: `none` is loopback",
        ),
        ("[base]\n[axes]\nlink = [\"mtu=9\"]", "link: "),
    ] {
        let s = Scenario::parse(&format!("name = \"x\"\n{bad}\n")).unwrap();
        let err = s.cells().unwrap_err().to_string();
        let at = axis_line(bad);
        assert!(err.starts_with(at) && err.contains(want), "{bad}: {err}");
    }
}

#[test]
fn a_clients_axis_names_each_sides_program_and_protocol() {
    let s = Scenario::parse(
        r#"
name = "clients"
[base]
rounds = 3
[axes]
clients = ["curl-h2,ngtcp2-h3", "qbench-h3,quic-go-h3"]
"#,
    )
    .unwrap();
    let cells = s.cells().unwrap();
    assert_eq!(cells.len(), 2);
    let c = cells[0].spec.as_compare().unwrap();
    assert_eq!(c.protos, (Protocol::H2, Protocol::H3));
    let (a, b) = c.sides();
    assert_eq!(a.client.as_ref().map(|c| c.name()), Some("curl"));
    assert_eq!(b.client.as_ref().map(|c| c.name()), Some("ngtcp2"));
    let (a, b) = cells[1].spec.as_compare().unwrap().sides();
    assert_eq!(
        (a.client, b.client.map(|c| c.name())),
        (None, Some("quic-go"))
    );
    assert_ne!(cells[0].hash, cells[1].hash);
    for bad in [
        "curl-h3,qbench-h3",
        "curl,qbench-h3",
        "wget-h2,qbench-h2",
        "curl-h2",
    ] {
        let text = format!("name = \"x\"\n[base]\n[axes]\nclients = [\"{bad}\"]\n");
        let e = Scenario::parse(&text)
            .unwrap()
            .cells()
            .unwrap_err()
            .to_string();
        assert!(e.contains("clients"), "{bad}: {e}");
    }
}
