//! The edt backend: rate and delay from earliest departure times. A BPF program on each router
//! egress (bpf/edt.bpf.c, built by build.rs) stamps every packet with the time it may leave,
//! sch_fq below it releases the packet then, and nftables drops for loss as on the userspace
//! backend. The program's parameters are written into a copy of the object per direction,
//! which tc loads; the copies live only while the plan runs.

use std::path::{Path, PathBuf};

use qbench_core::spec::link::{Direction, LinkSpec, RateSpec};
use qbench_core::units::Rate;

use crate::cmd::Cmd;
use crate::qdisc::default_queue;

static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/edt.bpf.o"));
static WHY_MISSING: &str = include_str!(concat!(env!("OUT_DIR"), "/edt.why"));

/// Marks the parameter block in the object's .rodata (`params.magic` in edt.bpf.c).
const MAGIC: u64 = 0x7462_656e_6368_6564;

/// `auto` picks edt from this rate up, where the kernel has sch_fq and tc BPF. fq releases a
/// GSO packet (up to 64 KiB) whole at its departure time, which at 1 Gbit/s is a burst of
/// 0.52 ms, about the delay tolerance calibration allows (0.5 ms); below it tbf (which cuts
/// super-packets) keeps the finer grain. From here up, tbf needs a burst of a millisecond's
/// bytes and more, and the userspace path runs out of CPU at a few Gbit/s.
pub const AUTO_FROM: Rate = Rate(1_000_000_000);

/// The Ethernet header a veth qdisc counts beyond the IP packet.
const ETH_HLEN: u64 = 14;

#[derive(Debug, thiserror::Error)]
pub enum EdtError {
    #[error("--backend edt: this qbench was built without its BPF program ({0}); install clang and libbpf-dev (Debian) and rebuild")]
    NotBuilt(&'static str),
    #[error("--backend edt: the BPF object holds {0} parameter blocks, expected one")]
    Object(usize),
    #[error("--backend edt: link field `{field}`: {why}")]
    Unsupported { field: String, why: &'static str },
    #[error("--backend edt: cannot write the BPF object to {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The compiled program, or why this build has none.
pub fn object() -> Result<&'static [u8], EdtError> {
    if OBJECT.is_empty() {
        Err(EdtError::NotBuilt(WHY_MISSING))
    } else {
        Ok(OBJECT)
    }
}

/// One direction's parameters, as the program reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// 0: delay only.
    pub rate_bytes_per_s: u64,
    pub delay_ns: u64,
    /// The longest a packet may wait for the rate: the queue's bytes at the rate.
    pub queue_ns: u64,
}

impl Params {
    /// `None` when the direction has neither a rate nor a delay (loss alone is nftables').
    pub fn of(d: &Direction, mtu: u32) -> Option<Self> {
        let rate = match &d.rate {
            Some(RateSpec::Fixed { bps }) => Some(*bps),
            _ => None,
        };
        if rate.is_none() && d.delay.is_zero() {
            return None;
        }
        let delay_ns = u64::try_from(d.delay.as_nanos()).unwrap_or(u64::MAX);
        let (rate_bytes_per_s, queue_ns) = match rate {
            Some(r) => {
                let bytes = d
                    .queue
                    .map_or_else(|| default_queue(r), |q| q.bytes_at(r))
                    .max(u64::from(mtu) * 2);
                let per_s = (r.0 / 8).max(1);
                let ns = u128::from(bytes) * 1_000_000_000 / u128::from(per_s);
                (per_s, u64::try_from(ns).unwrap_or(u64::MAX))
            }
            None => (0, 0),
        };
        Some(Self {
            rate_bytes_per_s,
            delay_ns,
            queue_ns,
        })
    }

    /// How long fq may be asked to hold a packet: its horizon drops anything later.
    fn horizon_us(&self) -> u64 {
        self.delay_ns.saturating_add(self.queue_ns) / 1000 + 1_000_000
    }

    /// fq's packet limits (total and per flow): twice what the delay and queue hold at the
    /// rate in full-size packets, so that fq never drops what the link would carry. A delay
    /// alone holds what the senders send, so it gets a generous fixed count.
    fn fq_limit(&self, mtu: u32) -> u64 {
        if self.rate_bytes_per_s == 0 {
            return 1_000_000;
        }
        let held = u128::from(self.rate_bytes_per_s)
            * u128::from(self.delay_ns.saturating_add(self.queue_ns))
            / 1_000_000_000
            / u128::from(u64::from(mtu) + ETH_HLEN);
        u64::try_from(held.saturating_mul(2))
            .unwrap_or(u64::MAX)
            .clamp(10_000, u64::from(u32::MAX / 2))
    }
}

/// A copy of the program with `p` written into its parameter block.
pub fn patched(p: &Params) -> Result<Vec<u8>, EdtError> {
    let mut obj = object()?.to_vec();
    let magic = MAGIC.to_le_bytes();
    let at: Vec<usize> = obj
        .windows(8)
        .enumerate()
        .filter(|(_, w)| *w == magic)
        .map(|(i, _)| i)
        .collect();
    let [i] = at[..] else {
        return Err(EdtError::Object(at.len()));
    };
    for (k, v) in [p.rate_bytes_per_s, p.delay_ns, p.queue_ns]
        .into_iter()
        .enumerate()
    {
        let o = i + 8 * (k + 1);
        obj[o..o + 8].copy_from_slice(&v.to_le_bytes());
    }
    Ok(obj)
}

/// What a link asks of the edt backend that it cannot do, as an error naming the field.
pub fn supports(link: &LinkSpec) -> Result<(), EdtError> {
    for (name, d) in [("up", &link.up), ("down", &link.down)] {
        if !d.jitter.is_zero() {
            return Err(EdtError::Unsupported {
                field: format!("{name}.jitter"),
                why: "the edt backend gives every packet one delay (fq keeps each flow in order); jitter needs --backend netem or userspace",
            });
        }
        if matches!(&d.rate, Some(r) if !matches!(r, RateSpec::Fixed { .. })) {
            return Err(EdtError::Unsupported {
                field: format!("{name}.rate"),
                why: "the edt backend takes a fixed rate; a varying rate needs --backend netem or userspace",
            });
        }
    }
    Ok(())
}

/// Whether `auto` should pick edt for this link, the kernel allowing.
pub fn suits_auto(link: &LinkSpec) -> bool {
    supports(link).is_ok()
        && [&link.up, &link.down]
            .iter()
            .any(|d| matches!(&d.rate, Some(RateSpec::Fixed { bps }) if bps.0 >= AUTO_FROM.0))
}

/// Where the plan expects one direction's object (`dir` is "up" or "down").
pub fn object_path(objects: &Path, dir: &str) -> PathBuf {
    objects.join(format!("edt-{dir}.o"))
}

/// Writes each direction's object into `objects`, which the caller removes once tc loaded them.
pub fn write_objects(objects: &Path, link: &LinkSpec) -> Result<(), EdtError> {
    let mtu = link.mtu.unwrap_or(1500);
    for (name, d) in [("up", &link.up), ("down", &link.down)] {
        if let Some(p) = Params::of(d, mtu) {
            let path = object_path(objects, name);
            std::fs::write(&path, patched(&p)?)
                .map_err(|source| EdtError::Write { path, source })?;
        }
    }
    Ok(())
}

/// The lines `--dry-run` adds after the script: what each object carries.
pub fn describe(objects: &Path, link: &LinkSpec) -> String {
    let mtu = link.mtu.unwrap_or(1500);
    let mut s = String::new();
    for (name, d) in [("up", &link.up), ("down", &link.down)] {
        if let Some(p) = Params::of(d, mtu) {
            s.push_str(&format!(
                "# {}: crates/shaper/bpf/edt.bpf.c built by clang, with rate_bytes_per_s={} delay_ns={} queue_ns={}\n",
                object_path(objects, name).display(),
                p.rate_bytes_per_s,
                p.delay_ns,
                p.queue_ns
            ));
        }
    }
    s
}

/// One direction's commands: fq at the root, the program on clsact's egress hook before it.
pub fn commands(ns: &str, dev: &str, d: &Direction, mtu: u32, obj: &Path) -> Vec<Cmd> {
    let Some(p) = Params::of(d, mtu) else {
        return Vec::new();
    };
    let limit = p.fq_limit(mtu).to_string();
    let horizon = format!("{}us", p.horizon_us());
    let obj = obj.display().to_string();
    vec![
        Cmd::new(
            Some(ns),
            &[
                "tc",
                "qdisc",
                "replace",
                "dev",
                dev,
                "root",
                "handle",
                "1:",
                "fq",
                "limit",
                &limit,
                "flow_limit",
                &limit,
                "horizon",
                &horizon,
                "horizon_drop",
            ],
        ),
        Cmd::new(Some(ns), &["tc", "qdisc", "add", "dev", dev, "clsact"]),
        Cmd::new(
            Some(ns),
            &[
                "tc", "filter", "add", "dev", dev, "egress", "bpf", "da", "obj", &obj, "sec", "tc",
            ],
        ),
    ]
}

#[cfg(test)]
mod tests;
