//! One cell's spec: its axis values laid over the base, a step per group of settings. The
//! steps run in a fixed order, so that of several bad values the same one is named first.

use std::collections::BTreeMap;

use super::{field, parse_protos, CellSpec, Kind, Scenario, ScenarioError, SideBase};
use crate::client_program::{ClientChoice, ClientProgram};
use crate::spec::bounds::{CONNECTIONS, REORDER_THRESHOLD, THREADS};
use crate::spec::cpulimit::CpuQuota;
use crate::spec::link::{parse_duration, LinkSpec};
use crate::spec::quic_knobs::QuicKnobs;
use crate::spec::workload::Workload;
use crate::spec::{parse_flows, CompareSpec, CompeteSpec, ProxyChoice, RunSpec, SideOverrides};
use crate::wire::{CcAlgo, Protocol};

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
        self.apply_transport(p, &mut run)?;
        self.apply_client(p, &mut run)?;
        self.apply_path(p, &mut run)?;
        run.load = self.load(pick(p, "request_rate", &self.base.request_rate))?;
        self.check_metric(&run)?;
        if let Some(c) = &self.base.client {
            run.client = ClientProgram::parse(c).map_err(|e| field("base.client", e))?;
        }
        if p.get("zero_rtt").map(String::as_str) == Some("true") {
            run.zero_rtt = true;
            run.resume = true;
        }
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

    /// Connections, congestion control, loss recovery and QUIC settings.
    fn apply_transport(&self, p: &Params, run: &mut RunSpec) -> Result<(), ScenarioError> {
        let b = &self.base;
        run.connections = match p.get("connections") {
            Some(v) => v.parse().map_err(|e| field("connections", e))?,
            None => b.connections.unwrap_or(run.connections),
        };
        CONNECTIONS
            .check(run.connections)
            .map_err(|e| field("connections", e))?;
        run.streams = b.streams.or(run.streams);
        if let Some(v) = pick(p, "cc", &b.cc) {
            run.cc = Some(v.parse::<CcAlgo>().map_err(|e| field("cc", e))?);
        }
        run.cwnd_cap = b.cwnd_cap.or(run.cwnd_cap);
        run.reorder_threshold = match p.get("reorder_threshold") {
            Some(v) => Some(v.parse().map_err(|e| field("reorder_threshold", e))?),
            None => b.reorder_threshold,
        };
        if let Some(n) = run.reorder_threshold {
            REORDER_THRESHOLD
                .check(n)
                .map_err(|e| field("reorder_threshold", e))?;
        }
        run.quic = self.quic(p)?;
        if let Some(r) = b.reorder_time_threshold {
            run.reorder_time_threshold = Some(
                crate::spec::parse_time_threshold(&r.to_string())
                    .map_err(|e| field("base.reorder_time_threshold", e))?,
            );
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

    /// The client's CPU limits and its timeout.
    fn apply_client(&self, p: &Params, run: &mut RunSpec) -> Result<(), ScenarioError> {
        let b = &self.base;
        let cpu = match p.get("client_cpu") {
            Some(v) => Some(v.parse().map_err(|e| field("client_cpu", e))?),
            None => b.client_cpu,
        };
        run.client_cpu = cpu.and_then(CpuQuota::fraction);
        let threads = |name: &str, base: Option<u32>| -> Result<u32, ScenarioError> {
            let n = match p.get("threads") {
                Some(v) => v.parse().map_err(|e| field("threads", e))?,
                None => base.unwrap_or(1),
            };
            THREADS.check(n).map_err(|e| {
                let name = if p.contains_key("threads") {
                    "threads"
                } else {
                    name
                };
                field(name, e)
            })
        };
        run.client_threads = threads("base.client_threads", b.client_threads)?;
        run.server_threads = threads("base.server_threads", b.server_threads)?;
        if let Some(v) = &b.client_cpuset {
            run.client_cpuset = Some(v.parse().map_err(|e| field("base.client_cpuset", e))?);
        }
        if let Some(v) = &b.timeout {
            run.timeout =
                parse_duration("base.timeout", v).map_err(|e| field("base.timeout", e))?;
        }
        Ok(())
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
        run.proxy = b.proxy.and_then(ProxyChoice::protocol);
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
        if let Some(v) = p.get("b_cwnd_cap") {
            b_side.cwnd_cap = Some(v.parse().map_err(|e| field("b_cwnd_cap", e))?);
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
    let Some(s) = s else {
        return Ok(SideOverrides::default());
    };
    Ok(SideOverrides {
        cc: s
            .cc
            .as_deref()
            .map(str::parse::<CcAlgo>)
            .transpose()
            .map_err(|e| field(&format!("base.{name}.cc"), e))?,
        cwnd_cap: s.cwnd_cap,
        connections: s.connections,
        client_cpu: s.client_cpu,
        proxy: s.proxy,
        client: s
            .client
            .as_deref()
            .map(str::parse::<ClientChoice>)
            .transpose()
            .map_err(|e| field(&format!("base.{name}.client"), e))?,
        ..SideOverrides::default()
    })
}

type Side = (Option<ClientProgram>, Protocol);

/// A `clients` axis value: `CLIENT-PROTO,CLIENT-PROTO`, each client speaking its protocol.
fn parse_clients(v: &str) -> Result<(Side, Side), ScenarioError> {
    let side = |s: &str| -> Result<Side, ScenarioError> {
        let (name, proto) = s
            .trim()
            .rsplit_once('-')
            .ok_or_else(|| field("clients", format!("`{s}`: give CLIENT-PROTO, e.g. curl-h2")))?;
        let proto: Protocol = proto.parse().map_err(|e| field("clients", e))?;
        let client = ClientProgram::parse(name).map_err(|e| field("clients", e))?;
        if let Some(c) = &client {
            c.check(proto).map_err(|e| field("clients", e))?;
        }
        Ok((client, proto))
    };
    match v.split(',').collect::<Vec<_>>().as_slice() {
        [a, b] => Ok((side(a)?, side(b)?)),
        _ => Err(field("clients", format!("`{v}`: give exactly two, as A,B"))),
    }
}
