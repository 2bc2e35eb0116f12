//! One cell's spec: its axis values laid over the base, a step per group of settings. The
//! steps run in a fixed order, so that of several bad values the same one is named first.

use std::collections::BTreeMap;

use super::{
    field, fields, parse_protos, scalar, CellSpec, Kind, Scenario, ScenarioError, SideBase,
};
use crate::client_program::{ClientChoice, ClientProgram};
use crate::server_program::{ServerChoice, ServerProgram};
use crate::spec::knobs::{side_knobs, KNOBS};
use crate::spec::link::{parse_duration, LinkSpec};
use crate::spec::quic_knobs::QuicKnobs;
use crate::spec::workload::Workload;
use crate::spec::{parse_flows, CompareSpec, CompeteSpec, RunSpec, SideOverrides};
use crate::wire::Protocol;

/// A cell's axis values, by axis name.
type Params = BTreeMap<String, String>;

/// The axis's value in this cell, else the base's.
fn pick(p: &Params, axis: &str, base: &Option<String>) -> Option<String> {
    p.get(axis).cloned().or(base.clone())
}

impl Scenario {
    /// What runs in the cell whose axis values are `p`.
    pub(super) fn spec(&self, p: &Params) -> Result<CellSpec, ScenarioError> {
        let run = self.run_spec(p)?;
        match self.kind {
            Kind::Compare => self.compare_spec(p, run),
            Kind::Compete => self.compete_spec(p, run),
        }
    }

    /// What every kind of cell runs: the settings shared by both sides or all flows.
    fn run_spec(&self, p: &Params) -> Result<RunSpec, ScenarioError> {
        let mut run = RunSpec::default();
        self.apply_workload(p, &mut run)?;
        self.apply_knobs(p, &mut run)?;
        run.quic = self.quic(p)?;
        if let Some(v) = &self.base.timeout {
            run.timeout =
                parse_duration("base.timeout", v).map_err(|e| field("base.timeout", e))?;
        }
        // A cell's 0-RTT sends its early data on a resumed session.
        run.resume |= run.zero_rtt;
        self.apply_path(p, &mut run)?;
        run.load = self.load(pick(p, "request_rate", &self.base.request_rate))?;
        self.check_metric(&run)?;
        Ok(run)
    }

    /// The protocol and what it fetches: objects, or a video or page in their place.
    fn apply_workload(&self, p: &Params, run: &mut RunSpec) -> Result<(), ScenarioError> {
        let b = &self.base;
        if let Some(v) = &b.proto {
            run.proto = v.parse().map_err(|e| field("base.proto", e))?;
        }
        if let Some(v) = pick(p, "objects", &b.objects) {
            let w: Workload = v.parse().map_err(|e| field("objects", e))?;
            run.objects = Some(w);
        }
        self.apply_apps(p, run)
    }

    /// The knobs of the table: each from its axis in this cell, else from `[base]`. An error
    /// names the axis, or the base field of a knob no axis sets.
    fn apply_knobs(&self, p: &Params, run: &mut RunSpec) -> Result<(), ScenarioError> {
        let base = fields(&self.base)?;
        for k in KNOBS {
            let from_axis = k
                .axis
                .and_then(|a| Some((a.to_string(), p.get(a)?.clone())));
            let from_base = || {
                let b = k.base?;
                let v = scalar(base.get(b)?)?;
                let name = match k.axis == Some(b) {
                    true => b.to_string(),
                    false => format!("base.{b}"),
                };
                Some((name, v))
            };
            if let Some((name, v)) = from_axis.or_else(from_base) {
                (k.set)(run, &v).map_err(|e| field(&name, e))?;
            }
        }
        Ok(())
    }

    /// `base.quic` with the `quic` axis's keys over it.
    fn quic(&self, p: &Params) -> Result<QuicKnobs, ScenarioError> {
        let knobs = |v: Option<&String>, name| {
            v.map_or(Ok(Default::default()), |t| QuicKnobs::parse_keys(t))
                .map_err(|e| field(name, e))
        };
        let quic =
            knobs(self.base.quic.as_ref(), "base.quic")?.overlaid(&knobs(p.get("quic"), "quic")?);
        quic.check().map_err(|e| field("quic", e))?;
        Ok(quic)
    }

    /// The emulated path: the client's segment (base link and link axes), the server's
    /// segment beyond a middle host, and the proxy that runs there.
    fn apply_path(&self, p: &Params, run: &mut RunSpec) -> Result<(), ScenarioError> {
        let b = &self.base;
        let mut link: Vec<String> = match p.get("link").map(String::as_str) {
            Some("none") => Vec::new(),
            Some(v) => vec![v.to_string()],
            None => b.link.iter().cloned().collect(),
        };
        for k in ["rate", "rtt", "loss", "jitter"] {
            if let Some(val) = p.get(k) {
                if p.get("link").is_some_and(|l| l == "none") {
                    return Err(field(
                        "link",
                        format!("`none` is loopback: a `{k}` axis needs a link"),
                    ));
                }
                link.push(format!("{k}={val}"));
            }
        }
        if !link.is_empty() {
            let spec: LinkSpec = link.join(",").parse().map_err(|e| field("link", e))?;
            run.link = Some(spec);
        }
        if let Some(v) = &b.link_b {
            if run.link.is_none() {
                return Err(field(
                    "base.link_b",
                    "needs base.link (the client's segment)",
                ));
            }
            run.link_b = Some(v.parse().map_err(|e| field("base.link_b", e))?);
        }
        if run.proxy.is_some() && run.link_b.is_none() {
            return Err(field(
                "base.proxy",
                "runs on the middle host: needs base.link_b",
            ));
        }
        Ok(())
    }

    /// `base.metric` must be measurable in the cell: it needs the load or video it reads.
    fn check_metric(&self, run: &RunSpec) -> Result<(), ScenarioError> {
        let Some(m) = self.base.metric else {
            return Ok(());
        };
        if self.kind == Kind::Compete {
            return Err(field("base.metric", "a competition is judged by fairness"));
        }
        m.check(run.load.as_ref())
            .map_err(|e| field("base.metric", e))?;
        if m.is_video() && run.video.is_none() {
            return Err(field("base.metric", format!("{m} needs a [video] table")));
        }
        Ok(())
    }

    fn compare_spec(&self, p: &Params, run: RunSpec) -> Result<CellSpec, ScenarioError> {
        let b = &self.base;
        let mut protos = match pick(p, "protos", &b.protos) {
            Some(v) => parse_protos(&v)?,
            None => (run.proto, run.proto),
        };
        let mut a_side = side_overrides(&b.a, "a")?;
        let mut b_side = side_overrides(&b.b, "b")?;
        if let Some(v) = p.get("clients") {
            if p.contains_key("protos") {
                return Err(field(
                    "clients",
                    "names each side's protocol: drop the protos axis",
                ));
            }
            let ((ca, pa), (cb, pb)) = parse_clients(v)?;
            protos = (pa, pb);
            a_side.client = Some(ClientChoice(ca));
            b_side.client = Some(ClientChoice(cb));
        }
        if let Some(v) = p.get("servers") {
            if p.contains_key("protos") || p.contains_key("clients") {
                return Err(field(
                    "servers",
                    "names each side's protocol: drop the protos and clients axes",
                ));
            }
            let ((sa, pa), (sb, pb)) = parse_servers(v)?;
            protos = (pa, pb);
            a_side.server = Some(ServerChoice(sa));
            b_side.server = Some(ServerChoice(sb));
        }
        for (_, side) in side_knobs() {
            if let Some((axis, v)) = side.b_axis.and_then(|a| Some((a, p.get(a)?))) {
                (side.set)(&mut b_side, v).map_err(|e| field(axis, e))?;
            }
        }
        let (rounds, auto_rounds) = self.rounds()?;
        Ok(CellSpec::Compare(CompareSpec {
            rounds,
            auto_rounds,
            a: a_side,
            b: b_side,
            protos,
            base: run,
        }))
    }

    fn compete_spec(&self, p: &Params, run: RunSpec) -> Result<CellSpec, ScenarioError> {
        let flows = pick(p, "flows", &self.base.flows)
            .ok_or_else(|| field("flows", "a competition needs base.flows or a flows axis"))?;
        Ok(CellSpec::Compete(CompeteSpec {
            flows: parse_flows(&flows).map_err(|e| field("flows", e))?,
            base: run,
        }))
    }
}

/// `base.a` or `base.b` (`name`) as that side's overrides.
fn side_overrides(s: &Option<SideBase>, name: &str) -> Result<SideOverrides, ScenarioError> {
    let mut o = SideOverrides::default();
    let Some(s) = s else {
        return Ok(o);
    };
    let given = fields(s)?;
    for (k, side) in side_knobs().filter(|(_, side)| side.in_file) {
        let Some((b, v)) = k.base.and_then(|b| Some((b, scalar(given.get(b)?)?))) else {
            continue;
        };
        (side.set)(&mut o, &v).map_err(|e| field(&format!("base.{name}.{b}"), e))?;
    }
    Ok(o)
}

type ServerSide = (Option<ServerProgram>, Protocol);
type Side = (Option<ClientProgram>, Protocol);
/// Both sides of a pair axis: each one's program and protocol.
type Pair<T> = ((T, Protocol), (T, Protocol));

/// An axis value `NAME-PROTO,NAME-PROTO` (`clients`, `servers`): each side's program, read by
/// `program`, which also says whether it speaks the protocol; `example` is one side's.
fn parse_pair<T>(
    axis: &str,
    example: &str,
    v: &str,
    program: impl Fn(&str, Protocol) -> Result<T, String>,
) -> Result<Pair<T>, ScenarioError> {
    let side = |s: &str| {
        let (name, proto) = s.trim().rsplit_once('-').ok_or_else(|| {
            let what = axis.trim_end_matches('s').to_uppercase();
            field(axis, format!("`{s}`: give {what}-PROTO, e.g. {example}"))
        })?;
        let proto: Protocol = proto.parse().map_err(|e| field(axis, e))?;
        Ok::<_, ScenarioError>((program(name, proto).map_err(|e| field(axis, e))?, proto))
    };
    match v.split(',').collect::<Vec<_>>().as_slice() {
        [a, b] => Ok((side(a)?, side(b)?)),
        _ => Err(field(axis, format!("`{v}`: give exactly two, as A,B"))),
    }
}

/// A `servers` axis value: `SERVER-PROTO,SERVER-PROTO`, each server serving its protocol.
fn parse_servers(v: &str) -> Result<(ServerSide, ServerSide), ScenarioError> {
    parse_pair("servers", "caddy-h3", v, |name, proto| {
        let server = ServerProgram::parse(name).map_err(|e| e.to_string())?;
        if let Some(c) = &server {
            c.check(proto).map_err(|e| e.to_string())?;
        }
        Ok(server)
    })
}

/// A `clients` axis value: `CLIENT-PROTO,CLIENT-PROTO`, each client speaking its protocol.
fn parse_clients(v: &str) -> Result<(Side, Side), ScenarioError> {
    parse_pair("clients", "curl-h2", v, |name, proto| {
        let client = ClientProgram::parse(name).map_err(|e| e.to_string())?;
        if let Some(c) = &client {
            c.check(proto).map_err(|e| e.to_string())?;
        }
        Ok(client)
    })
}
