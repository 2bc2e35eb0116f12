//! The `server` and `servers` axes and `[base] server`: which program serves each side.

use super::*;
use crate::wire::Protocol;

#[test]
fn a_servers_axis_names_each_sides_program_and_protocol() {
    let s = Scenario::parse(
        r#"
name = "servers"
[base]
rounds = 3
[axes]
servers = ["qbench-h3,caddy-h3", "nginx-h2,quic-go-h3"]
"#,
    )
    .unwrap();
    let cells = s.cells().unwrap();
    assert_eq!(cells.len(), 2);
    let c = cells[0].spec.as_compare().unwrap();
    assert_eq!(c.protos, (Protocol::H3, Protocol::H3));
    let (a, b) = c.sides();
    assert_eq!(a.server, None);
    assert_eq!(b.server.as_ref().map(|s| s.name()), Some("caddy"));
    let (a, b) = cells[1].spec.as_compare().unwrap().sides();
    assert_eq!(
        (a.server.map(|s| s.name()), b.server.map(|s| s.name())),
        (Some("nginx"), Some("quic-go"))
    );
    assert_ne!(cells[0].hash, cells[1].hash);
    for bad in [
        "nginx-h3,qbench-h3",
        "caddy,qbench-h3",
        "apache-h2,qbench-h2",
        "caddy-h2",
    ] {
        let text = format!("name = \"x\"\n[base]\n[axes]\nservers = [\"{bad}\"]\n");
        let e = Scenario::parse(&text)
            .unwrap()
            .cells()
            .unwrap_err()
            .to_string();
        assert!(e.contains("servers"), "{bad}: {e}");
    }
    let both =
        "name = \"x\"\n[base]\n[axes]\nprotos = [\"h2,h3\"]\nservers = [\"qbench-h2,caddy-h2\"]\n";
    let e = Scenario::parse(both)
        .unwrap()
        .cells()
        .unwrap_err()
        .to_string();
    assert!(e.contains("drop the protos"), "{e}");
}

#[test]
fn a_server_axis_and_a_sides_server_are_lowered_like_any_knob() {
    let s = Scenario::parse(
        r#"
name = "server"
[base]
protos = "h2,h3"
server = "caddy"
[base.a]
server = "qbench"
[axes]
server = ["caddy", "hypercorn"]
"#,
    )
    .unwrap();
    let cells = s.cells().unwrap();
    assert_eq!(cells.len(), 2);
    let (a, b) = cells[1].spec.as_compare().unwrap().sides();
    assert_eq!(
        a.server, None,
        "[base.a] server = qbench wins over the axis"
    );
    assert_eq!(b.server.map(|s| s.name()), Some("hypercorn"));
}
