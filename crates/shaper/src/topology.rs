//! The emulated path as an RAII guard: client, router and server namespaces with the link's
//! impairments on the router. Dropping it stops the forwarders and deletes the namespaces.

use qbench_core::spec::link::LinkSpec;

use qbench_core::report::calibration::Calibration;
use qbench_core::report::link::Recalibration;

use crate::calibrate::CalibrateError;
use crate::exec::{ExecError, Executor};
use crate::forwarder::{Forwarder, Impairment};
use crate::netns::{self, NetnsError};
use crate::plan::{
    self, Backend, Names, Offloads, PlanOptions, ROUTER_TO_CLIENT, ROUTER_TO_SERVER, TUN_DOWN,
    TUN_UP,
};
use crate::probe::{probe, Capabilities, ProbeError};
use crate::rate::{RateController, RateError, Varying};
use crate::tun::Tun;

/// What the userspace delay path carried for one TCP stream on a 2-core VM with TUN offloads
/// (6-8 Gbit/s at 10 ms per direction, 10-12 Gbit/s at 0 ms): above this, the forwarder, not
/// the configured link, may be the bottleneck.
pub const USERSPACE_DELAY_CAPACITY_BPS: u64 = 6_000_000_000;

/// Note attached to every report: what a tbf rate means for goodput.
pub const L2_NOTE: &str =
    "tc counts L2 bytes: TCP goodput tops out near 95-96% of the configured rate";

/// Note attached when loss turned the veths' offloads off.
pub const LOSS_OFFLOADS_NOTE: &str = "loss: GSO/TSO/GRO are off on the link's veths, so that each packet, not each GSO super-packet, is dropped with the loss probability (--offloads on keeps them)";

#[derive(Debug, thiserror::Error)]
pub enum ShaperError {
    #[error("a link with id {0} is up already; `qbench-shaper down --id {0}` ends it")]
    InUse(String),
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error(transparent)]
    Rate(#[from] RateError),
    #[error("starting the userspace forwarder on {tun}: {source}")]
    Forwarder { tun: String, source: std::io::Error },
    #[error(transparent)]
    Calibrate(#[from] CalibrateError),
    #[error(transparent)]
    Owner(#[from] crate::owner::OwnerError),
    #[error("--strict-link: {0}")]
    Missed(String),
    #[error("reading {key} back in the server's namespace: {source}")]
    ReadBack {
        key: &'static str,
        source: ExecError,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum BackendChoice {
    /// edt for a fixed rate from 1 Gbit/s where sch_fq and tc BPF work, else netem where it
    /// works, else userspace.
    #[default]
    Auto,
    /// tbf + netem on the router (kernels with sch_netem).
    Netem,
    /// tbf, nftables and a userspace TUN forwarder (any kernel).
    Userspace,
    /// Earliest departure times: a tc BPF program and sch_fq (fixed rates, no jitter).
    Edt,
}

#[derive(Debug, Clone)]
pub struct TopologyOptions {
    pub backend: BackendChoice,
    pub offloads: Offloads,
    pub tcp_cwnd_cap: Option<u32>,
    pub tcp_initial_cwnd: Option<u32>,
    /// `net.ipv4.tcp_reordering` in the server's namespace.
    pub tcp_reordering: Option<u32>,
    /// Namespace id; random when `None`.
    pub id: Option<String>,
    /// Measure the link once built (`crate::calibrate`); the report carries what was found.
    pub calibrate: bool,
    /// Refuse a link that misses a field of its spec beyond the tolerances (needs `calibrate`).
    pub strict: bool,
    /// Asked while the link settles and is measured: a stopping signal ends those at once.
    pub stop: crate::stop::Stop,
}

impl TopologyOptions {
    /// A link with `backend` and nothing else asked: default offloads, no TCP route settings,
    /// a random id, not measured.
    pub fn plain(backend: BackendChoice) -> Self {
        Self {
            backend,
            offloads: Offloads::Default,
            tcp_cwnd_cap: None,
            tcp_initial_cwnd: None,
            tcp_reordering: None,
            id: None,
            calibrate: false,
            strict: false,
            stop: crate::stop::Stop::default(),
        }
    }
}

/// What the report says about the link.
pub use qbench_core::report::link::LinkReport;

pub struct Topology {
    names: Names,
    link: LinkSpec,
    backend: Backend,
    caps: Capabilities,
    executed: Vec<String>,
    forwarders: Vec<(String, Forwarder)>,
    rates: Option<RateController>,
    /// Sysctls set in the server's namespace, as read back there.
    server_sysctls: Vec<(String, String)>,
    /// Offloads were turned off because the link drops packets (`plan::effective_offloads`).
    offloads_off_for_loss: bool,
    calibration: Option<Calibration>,
    /// How long the link took to carry its first echo (`crate::settle`); `None` if it did not.
    settled: Option<std::time::Duration>,
    /// Measurements taken between rounds (`record_recalibration`), in order.
    recalibrations: std::sync::Mutex<Vec<Recalibration>>,
    /// When the link was set up: a fixed rate's allowance runs from here.
    built: std::time::Instant,
    /// Held while the namespaces exist, so that `cleanup` leaves them alone; released after
    /// `Drop` has deleted them.
    _owner: crate::owner::Owner,
    stop: crate::stop::Stop,
}

mod run_check;
pub use run_check::LinkSnapshot;

/// Never with the top four bits set: those name a capability probe's namespace
/// (`probe::probe_id`).
fn random_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{:x}",
        (std::process::id().rotate_left(12) ^ nanos) & 0x0fff_ffff
    )
}

fn impairment(d: &qbench_core::spec::link::Direction, loss_here: bool) -> Impairment {
    Impairment {
        delay: d.delay,
        jitter: d.jitter,
        reorder: d.reorders(),
        loss: if loss_here { d.loss } else { 0.0 },
    }
}

/// The backend and plan options for this machine's capabilities.
fn plan_options(opts: &TopologyOptions, caps: &Capabilities, link: &LinkSpec) -> PlanOptions {
    PlanOptions {
        backend: match opts.backend {
            BackendChoice::Auto => crate::probe::auto_backend(caps, link),
            BackendChoice::Netem => Backend::Netem,
            BackendChoice::Userspace => Backend::Userspace,
            BackendChoice::Edt => Backend::Edt,
        },
        offloads: opts.offloads,
        nft: caps.nft,
        tcp_cwnd_cap: opts.tcp_cwnd_cap,
        tcp_initial_cwnd: opts.tcp_initial_cwnd,
        tcp_reordering: opts.tcp_reordering,
        edt_objects: std::env::temp_dir().join("qbench-edt-ID"),
    }
}

/// What the edt backend cannot build, and the lines naming the objects it would load.
fn edt_notes(plan_opts: &PlanOptions, link: &LinkSpec) -> Result<String, ShaperError> {
    if plan_opts.backend != Backend::Edt {
        return Ok(String::new());
    }
    crate::edt::object().map_err(ProbeError::from)?;
    crate::edt::supports(link).map_err(ProbeError::from)?;
    Ok(crate::edt::describe(&plan_opts.edt_objects, link))
}

/// The link's owner lock, held while its namespaces exist; a link with this id that is up
/// already is left alone (its namespaces are not ours).
fn claim(names: &Names) -> Result<crate::owner::Owner, ShaperError> {
    let owner = crate::owner::Owner::claim(&crate::owner::link(&names.id))?
        .ok_or_else(|| ShaperError::InUse(names.id.clone()))?;
    let existing = netns::list();
    if names.own().iter().any(|ns| existing.contains(*ns)) {
        return Err(ShaperError::InUse(names.id.clone()));
    }
    Ok(owner)
}

/// The edt backend's objects, written to a new directory: they exist only while tc loads
/// them, so the directory goes when the plan has run. `None` for the other backends.
fn edt_objects(
    backend: Backend,
    link: &LinkSpec,
) -> Result<Option<tempfile::TempDir>, ShaperError> {
    if backend != Backend::Edt {
        return Ok(None);
    }
    let dir = tempfile::Builder::new()
        .prefix("qbench-edt-")
        .tempdir()
        .map_err(|source| crate::edt::EdtError::Write {
            path: std::env::temp_dir(),
            source,
        })
        .map_err(ProbeError::from)?;
    crate::edt::write_objects(dir.path(), link).map_err(ProbeError::from)?;
    Ok(Some(dir))
}

/// The server namespace's sysctls the report records, as read back there: TCP's MTU probing
/// (which decides, with the initial window, how many round trips a small object takes over
/// TCP), and the reordering threshold when the link sets it.
fn read_back(server: &str, reordering: bool) -> Result<Vec<(String, String)>, ShaperError> {
    let mut keys = vec!["net.ipv4.tcp_mtu_probing"];
    if reordering {
        keys.push("net.ipv4.tcp_reordering");
    }
    let mut read = Vec::new();
    for key in keys {
        let value = crate::exec::read_sysctl(server, key)
            .map_err(|source| ShaperError::ReadBack { key, source })?;
        read.push((key.to_string(), value));
    }
    Ok(read)
}

/// The directions whose rate changes over time, for the rate controller to drive.
fn varying_rates(link: &LinkSpec) -> Result<Vec<Varying>, ShaperError> {
    let mut varying = Vec::new();
    for (dir, dev, d) in [
        ("up", ROUTER_TO_SERVER, &link.up),
        ("down", ROUTER_TO_CLIENT, &link.down),
    ] {
        if let Some(spec) = &d.rate {
            varying.extend(Varying::new(dir, dev, spec, d.queue)?);
        }
    }
    Ok(varying)
}

/// The plan this link would run, for `--dry-run` (probes the kernel, changes nothing).
pub fn dry_run(link: &LinkSpec, opts: &TopologyOptions) -> Result<(Backend, String), ShaperError> {
    let plan_opts = plan_options(opts, &probe(), link);
    let names = Names::new(opts.id.as_deref().unwrap_or("ID"));
    let notes = edt_notes(&plan_opts, link)?;
    Ok((
        plan_opts.backend,
        plan::script(&plan::up(&names, link, &plan_opts)) + &notes,
    ))
}

/// The plan of a chain, `near` then `far` beyond it, for `--dry-run`.
pub fn dry_run_chain(
    near: &LinkSpec,
    far: &LinkSpec,
    opts: &TopologyOptions,
) -> Result<(Backend, String), ShaperError> {
    let caps = probe();
    let near_opts = plan_options(opts, &caps, near);
    let mut far_opts = plan_options(opts, &caps, far);
    far_opts.edt_objects = std::env::temp_dir().join("qbench-edt-ID2");
    let a = Names::new("ID");
    let b = Names::beyond("ID2", &a);
    let mut cmds = plan::up(&a, near, &near_opts);
    cmds.extend(plan::up(&b, far, &far_opts));
    cmds.extend(plan::chain(&a, &b));
    let notes = edt_notes(&near_opts, near)? + &edt_notes(&far_opts, far)?;
    Ok((near_opts.backend, plan::script(&cmds) + &notes))
}

impl Topology {
    pub fn up(link: LinkSpec, opts: &TopologyOptions) -> Result<Self, ShaperError> {
        let names = Names::new(&opts.id.clone().unwrap_or_else(random_id));
        Self::build(link, opts, names, Vec::new())
    }

    /// The second segment of a chain: from `near`'s server namespace (the middle host) to a
    /// server of its own, with routes that also carry traffic straight across both.
    pub fn up_beyond(
        link: LinkSpec,
        opts: &TopologyOptions,
        near: &Self,
    ) -> Result<Self, ShaperError> {
        let mut id = random_id();
        for _ in 0..16 {
            if id != near.names.id {
                break;
            }
            id = random_id();
        }
        let names = Names::beyond(&id, &near.names);
        let joins = plan::chain(&near.names, &names);
        Self::build(link, opts, names, joins)
    }

    fn build(
        link: LinkSpec,
        opts: &TopologyOptions,
        names: Names,
        extra: Vec<plan::Cmd>,
    ) -> Result<Self, ShaperError> {
        let caps = probe();
        let mut plan_opts = plan_options(opts, &caps, &link);
        let backend = plan_opts.backend;
        let offloads = plan::effective_offloads(opts.offloads, &link);
        crate::probe::check(&caps, backend, &link, offloads != Offloads::Default)?;
        let owner = claim(&names)?;
        let mut topo = Self {
            names: names.clone(),
            link: link.clone(),
            backend,
            caps,
            executed: Vec::new(),
            forwarders: Vec::new(),
            rates: None,
            server_sysctls: Vec::new(),
            offloads_off_for_loss: offloads != opts.offloads,
            calibration: None,
            settled: None,
            recalibrations: std::sync::Mutex::default(),
            built: std::time::Instant::now(),
            _owner: owner,
            stop: opts.stop.clone(),
        };
        // From here on, Drop tears down whatever part was built.
        let edt_objects = edt_objects(backend, &link)?;
        if let Some(dir) = &edt_objects {
            plan_opts.edt_objects = dir.path().to_path_buf();
        }
        let mut exec = Executor::default();
        let mut cmds = plan::up(&names, &link, &plan_opts);
        cmds.extend(extra);
        let result = exec.run_all(&cmds);
        drop(edt_objects);
        topo.executed = exec.done;
        result?;
        topo.server_sysctls = read_back(&names.server, plan_opts.tcp_reordering.is_some())?;
        if backend == Backend::Userspace {
            topo.start_forwarders(!plan_opts.nft)?;
        }
        let mtu = link.mtu.unwrap_or(1500);
        topo.rates = RateController::start(&names.router, varying_rates(&link)?, mtu)?;
        topo.settled = crate::settle::settle(&names, &link, &opts.stop)?;
        if opts.calibrate {
            let c = topo.calibrate()?;
            let misses: Vec<String> = c.misses().map(|m| m.line()).collect();
            if opts.strict && !misses.is_empty() {
                return Err(ShaperError::Missed(misses.join("; ")));
            }
        }
        Ok(topo)
    }

    fn start_forwarders(&mut self, loss_here: bool) -> Result<(), ShaperError> {
        let plan_has_tun = self.executed.iter().any(|c| c.contains("tuntap"));
        if !plan_has_tun {
            return Ok(());
        }
        let router = self.names.router.clone();
        let dirs = [
            (TUN_UP, impairment(&self.link.up, loss_here)),
            (TUN_DOWN, impairment(&self.link.down, loss_here)),
        ];
        // Forwarder threads inherit the namespace of the thread that starts them.
        let started =
            std::thread::spawn(move || -> Result<Vec<(String, Forwarder)>, ShaperError> {
                netns::enter(&router)?;
                let mut out = Vec::new();
                for (tun, imp) in dirs {
                    let fwd = Tun::open(tun, true)
                        .and_then(|t| Forwarder::start(t, imp))
                        .map_err(|source| ShaperError::Forwarder {
                            tun: tun.into(),
                            source,
                        })?;
                    out.push((tun.to_string(), fwd));
                }
                Ok(out)
            })
            .join()
            .expect("forwarder start thread does not panic")?;
        self.forwarders = started;
        Ok(())
    }

    pub fn names(&self) -> &Names {
        &self.names
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Measures the link as built against its spec (`crate::calibrate`); the report carries
    /// the latest measurement.
    pub fn calibrate(&mut self) -> Result<&Calibration, CalibrateError> {
        let c = crate::calibrate::calibrate_until(&self.names, &self.link, &self.stop)?;
        Ok(self.calibration.insert(c))
    }

    /// How long the link took, once built, to carry an echo each way; `None` if it carried
    /// none in `settle::SETTLE_TIME`.
    pub fn settled(&self) -> Option<std::time::Duration> {
        self.settled
    }

    pub fn calibration(&self) -> Option<&Calibration> {
        self.calibration.as_ref()
    }

    /// What measuring the link needs, owned, so that it can be measured off the caller's
    /// thread (`calibrate::calibrate`) while the link stays borrowed by the runs.
    pub fn measurable(&self) -> (Names, LinkSpec) {
        (self.names.clone(), self.link.clone())
    }

    /// Keeps a measurement taken between rounds for the report.
    pub fn record_recalibration(&self, before_round: u32, calibration: Calibration) {
        self.recalibrations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Recalibration {
                before_round,
                calibration,
            });
    }

    /// Each forwarder's counters now (none with the kernel's qdiscs).
    pub fn forwarder_stats(&self) -> Vec<(String, qbench_core::report::link::ForwarderStats)> {
        self.forwarders
            .iter()
            .map(|(n, f)| (n.clone(), f.stats()))
            .collect()
    }

    /// What the router's qdiscs (and nftables loss rules) have dropped since the link was
    /// built; `None` if they cannot be read.
    pub fn drops(&self) -> Option<crate::drops::Drops> {
        let nft_loss = matches!(self.backend, Backend::Userspace | Backend::Edt)
            && self.caps.nft
            && (self.link.up.loss > 0.0 || self.link.down.loss > 0.0);
        crate::drops::read(&self.names.router, nft_loss)
    }

    pub fn report(&self) -> LinkReport {
        LinkReport {
            spec: self.link.clone(),
            backend: self.backend,
            capabilities: self.caps.clone(),
            namespaces: self.names.clone(),
            commands: self.executed.clone(),
            forwarders: self.forwarder_stats(),
            rate_changes: self.rates.as_ref().map(|r| r.changes()).unwrap_or_default(),
            notes: self.notes(),
            calibration: self.calibration.clone(),
            recalibrations: self
                .recalibrations
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    /// A sysctl of the server's namespace as read back when the link was built.
    pub fn server_sysctl(&self, key: &str) -> Option<&str> {
        self.server_sysctls
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = vec![L2_NOTE.to_string()];
        for (k, v) in &self.server_sysctls {
            notes.push(format!("server namespace: {k} = {v} (read back)"));
        }
        if self.offloads_off_for_loss {
            notes.push(LOSS_OFFLOADS_NOTE.to_string());
        }
        if !self.forwarders.is_empty() {
            for (dir, d) in self.link.directions() {
                let peak = d.rate.as_ref().and_then(|r| r.peak());
                if peak.is_none_or(|p| p.0 > USERSPACE_DELAY_CAPACITY_BPS) {
                    notes.push(format!(
                        "{dir}: the userspace delay path carries about {} Gbit/s on this kind of machine; a faster link ({}) is limited by it, not by the configured rate",
                        USERSPACE_DELAY_CAPACITY_BPS / 1_000_000_000,
                        peak.map_or("no rate limit".to_string(), |p| p.to_string())
                    ));
                }
            }
        }
        notes
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        self.rates = None;
        for (_, f) in self.forwarders.drain(..) {
            f.stop();
        }
        // Only the namespaces this topology added: a failed `up` whose id turned out to be
        // taken (another process won the race) must not delete the other's link.
        for c in plan::down(&self.names) {
            let ns = c.argv.last().cloned().unwrap_or_default();
            let added = plan::Cmd::new(None, &["ip", "netns", "add", &ns]).to_string();
            if self.executed.contains(&added) {
                let _ = crate::exec::run(&c);
            }
        }
    }
}
