//! The run's scalar settings, declared once: each knob's flag, how its value is read from a
//! spec and written into one, its scenario field and axis, and its per-side variant. The
//! command line that reruns a spec, a side's overrides and label, and a scenario cell's
//! lowering are loops over this table.

use std::fmt::Display;
use std::str::FromStr;
use std::time::Duration;

use crate::client_program::{ClientChoice, ClientProgram};
use crate::server_program::{ServerChoice, ServerProgram};
use crate::spec::bounds::{
    Bound, CONNECTIONS, REORDER_THRESHOLD, RUNS, STREAMS, THREADS, WINDOW_PACKETS,
};
use crate::spec::cpulimit::CpuQuota;
use crate::spec::load::{parse_rate, Arrivals, Load, DEFAULT_MAX_INFLIGHT};
use crate::spec::quic_knobs::QuicKnobs;
use crate::spec::{parse_time_threshold, ProxyChoice, RunSpec, SideOverrides};
use crate::wire::Protocol;

/// One flag of a run, as the table knows it.
pub struct Knob {
    /// The long flag without `--`.
    pub flag: &'static str,
    /// Takes no value: the flag is given when `get` says `Some`.
    pub switch: bool,
    /// The flag's value in `s` as the flag takes it, `None` where `s` has the default.
    pub get: fn(&RunSpec) -> Option<String>,
    /// `s` with the flag's value parsed, checked against its bound, and put in.
    pub set: fn(&mut RunSpec, &str) -> Result<(), String>,
    /// Its field in a scenario's `[base]`, lowered through `set`.
    pub base: Option<&'static str>,
    /// The scenario axis that sets it in both sides, over `base`.
    pub axis: Option<&'static str>,
    /// `--a.X` and `--b.X`.
    pub side: Option<SideKnob>,
    /// A value that differs from the default (a side's too), for the tests that set every
    /// knob and read it back; a switch's is `true`.
    pub sample: &'static str,
    /// Knobs whose samples must be set first for this one to mean something (the open
    /// loop's refinements need a held load and a rate, `--link-b` a `--link`).
    pub needs: &'static [&'static str],
}

/// A knob one side of a comparison can set differently.
pub struct SideKnob {
    /// The side's value as `--a.X` takes it (its label's text too).
    pub get: fn(&SideOverrides) -> Option<String>,
    pub set: fn(&mut SideOverrides, &str) -> Result<(), String>,
    /// The side's value laid over the run's.
    pub apply: fn(&SideOverrides, &mut RunSpec),
    /// Also a field of `[base.a]` and `[base.b]`, named as the knob's `base`.
    pub in_file: bool,
    /// The scenario axis that sets side B's value alone.
    pub b_axis: Option<&'static str>,
    /// What `--a.X`'s help says after "--X for this side": the value that undoes the common
    /// flag, where there is one.
    pub note: &'static str,
}

impl Knob {
    const fn new(
        flag: &'static str,
        get: fn(&RunSpec) -> Option<String>,
        set: fn(&mut RunSpec, &str) -> Result<(), String>,
    ) -> Self {
        Self {
            flag,
            switch: false,
            get,
            set,
            base: None,
            axis: None,
            side: None,
            sample: "",
            needs: &[],
        }
    }

    const fn sample(mut self, value: &'static str) -> Self {
        self.sample = value;
        self
    }

    const fn needs(mut self, flags: &'static [&'static str]) -> Self {
        self.needs = flags;
        self
    }

    const fn base(mut self, name: &'static str) -> Self {
        self.base = Some(name);
        self
    }

    const fn axis(mut self, name: &'static str) -> Self {
        self.axis = Some(name);
        self
    }

    const fn switch(mut self) -> Self {
        self.switch = true;
        self.sample = "true";
        self
    }

    const fn side(mut self, side: SideKnob) -> Self {
        self.side = Some(side);
        self
    }
}

impl SideKnob {
    const fn new(
        get: fn(&SideOverrides) -> Option<String>,
        set: fn(&mut SideOverrides, &str) -> Result<(), String>,
        apply: fn(&SideOverrides, &mut RunSpec),
    ) -> Self {
        Self {
            get,
            set,
            apply,
            in_file: false,
            b_axis: None,
            note: "",
        }
    }

    const fn note(mut self, text: &'static str) -> Self {
        self.note = text;
        self
    }

    const fn in_file(mut self) -> Self {
        self.in_file = true;
        self
    }

    const fn b_axis(mut self, name: &'static str) -> Self {
        self.b_axis = Some(name);
        self
    }
}

fn text<T: Display>(v: &Option<T>) -> Option<String> {
    v.as_ref().map(T::to_string)
}

fn parse<T: FromStr>(v: &str) -> Result<T, String>
where
    T::Err: Display,
{
    v.trim().parse().map_err(|e: T::Err| e.to_string())
}

fn count(bound: &Bound<u32>, v: &str) -> Result<u32, String> {
    bound.parse(v)
}

fn time(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

fn duration(v: &str) -> Result<Duration, String> {
    humantime::parse_duration(v.trim()).map_err(|e| e.to_string())
}

fn put<T>(slot: &mut T, v: Result<T, String>) -> Result<(), String> {
    *slot = v?;
    Ok(())
}

/// `value` where it is not the default.
fn differs<T: PartialEq>(value: T, default: T, show: fn(T) -> String) -> Option<String> {
    (value != default).then(|| show(value))
}

/// The held load, started where a refining flag comes before `--duration`.
fn load(s: &mut RunSpec) -> &mut Load {
    s.load.get_or_insert(Load {
        duration: Duration::ZERO,
        warmup: Duration::ZERO,
        rate: None,
        arrivals: Arrivals::default(),
        max_inflight: DEFAULT_MAX_INFLIGHT,
    })
}

/// A knob over an `Option` field: unset by default, `parse` reads the flag's value.
macro_rules! opt {
    ($flag:literal, $f:ident, $parse:expr) => {
        Knob::new(
            $flag,
            |s| text(&s.$f),
            |s, v| put(&mut s.$f, $parse(v).map(Some)),
        )
    };
}

/// A knob over a field with a default, raised where it differs.
macro_rules! value {
    ($flag:literal, $f:ident, $show:expr, $parse:expr) => {
        Knob::new(
            $flag,
            |s| differs(s.$f, RunSpec::default().$f, $show),
            |s, v| put(&mut s.$f, $parse(v)),
        )
    };
}

/// A flag without a value over a `bool` field.
macro_rules! switch {
    ($flag:literal, $f:ident) => {
        Knob::new(
            $flag,
            |s| s.$f.then(String::new),
            |s, v| put(&mut s.$f, parse(v)),
        )
        .switch()
    };
}

/// A side's override of an `Option` field of the same name and type as the run's.
macro_rules! side {
    ($f:ident, $parse:expr) => {
        SideKnob::new(
            |o| text(&o.$f),
            |o, v| put(&mut o.$f, $parse(v).map(Some)),
            |o, s| s.$f = o.$f.or(s.$f),
        )
    };
}

/// In the order the command line that reruns a spec gives them; a side's label names its
/// overrides in this order too.
pub static KNOBS: &[Knob] = &[
    value!("runs", runs, |n| n.to_string(), |v| count(&RUNS, v)).sample("4"),
    value!("timeout", timeout, time, duration).sample("17s"),
    opt!("cc", cc, parse)
        .base("cc")
        .axis("cc")
        .side(side!(cc, parse).in_file())
        .sample("bbr"),
    opt!("cwnd-cap", cwnd_cap, |v| count(&WINDOW_PACKETS, v))
        .base("cwnd_cap")
        .side(
            side!(cwnd_cap, |v| count(&WINDOW_PACKETS, v))
                .in_file()
                .b_axis("b_cwnd_cap"),
        )
        .sample("20"),
    opt!("initial-cwnd", initial_cwnd, |v| count(&WINDOW_PACKETS, v))
        .side(side!(initial_cwnd, |v| count(&WINDOW_PACKETS, v)))
        .sample("12"),
    opt!("reorder-threshold", reorder_threshold, |v| count(
        &REORDER_THRESHOLD,
        v
    ))
    .base("reorder_threshold")
    .axis("reorder_threshold")
    .sample("9"),
    opt!(
        "reorder-time-threshold",
        reorder_time_threshold,
        parse_time_threshold
    )
    .base("reorder_time_threshold")
    .sample("1.5"),
    // In bytes on the command line, as the label's `rwnd=64KB` would round-trip too.
    Knob::new(
        "rwnd",
        |s| s.rwnd.map(|b| b.0.to_string()),
        |s, v| put(&mut s.rwnd, parse(v).map(Some)),
    )
    .side(side!(rwnd, parse))
    .sample("64KiB"),
    value!("connections", connections, |n| n.to_string(), |v| count(
        &CONNECTIONS,
        v
    ))
    .base("connections")
    .axis("connections")
    .side(
        SideKnob::new(
            |o| text(&o.connections),
            |o, v| put(&mut o.connections, count(&CONNECTIONS, v).map(Some)),
            |o, s| s.connections = o.connections.unwrap_or(s.connections),
        )
        .in_file(),
    )
    .sample("3"),
    opt!("streams", streams, |v| count(&STREAMS, v))
        .base("streams")
        .side(side!(streams, |v| count(&STREAMS, v)))
        .sample("7"),
    Knob::new(
        "quic",
        |s| (!s.quic.is_empty()).then(|| s.quic.to_string()),
        |s, v| put(&mut s.quic, parse::<QuicKnobs>(v)),
    )
    .sample("ack-frequency=4,gso=off"),
    Knob::new(
        "client-cpu",
        |s| text(&s.client_cpu),
        |s, v| {
            put(
                &mut s.client_cpu,
                parse::<CpuQuota>(v).map(CpuQuota::fraction),
            )
        },
    )
    .base("client_cpu")
    .axis("client_cpu")
    .side(
        SideKnob::new(
            |o| text(&o.client_cpu),
            |o, v| put(&mut o.client_cpu, parse(v).map(Some)),
            |o, s| {
                if let Some(q) = o.client_cpu {
                    s.client_cpu = q.fraction();
                }
            },
        )
        .in_file()
        .note(", or `none` for no quota"),
    )
    .sample("0.5"),
    opt!("client-cpuset", client_cpuset, parse)
        .base("client_cpuset")
        .sample("0-1,3"),
    value!("sample-interval", sample_interval, time, duration).sample("20ms"),
    Knob::new(
        "link",
        |s| s.link.as_ref().map(|l| l.text.clone()),
        |s, v| put(&mut s.link, parse(v).map(Some)),
    )
    .sample("rtt=10ms,rate=20mbit"),
    Knob::new(
        "link-b",
        |s| s.link_b.as_ref().map(|l| l.text.clone()),
        |s, v| put(&mut s.link_b, parse(v).map(Some)),
    )
    .sample("rtt=30ms")
    .needs(&["link"]),
    Knob::new(
        "proxy",
        |s| text(&s.proxy),
        |s, v| put(&mut s.proxy, parse(v).map(ProxyChoice::protocol)),
    )
    .base("proxy")
    .side(
        SideKnob::new(
            |o| text(&o.proxy),
            |o, v| put(&mut o.proxy, parse(v).map(Some)),
            |o, s| {
                if let Some(p) = o.proxy {
                    s.proxy = p.protocol();
                }
            },
        )
        .in_file()
        .note(" (h2, h3), or `none` to go straight to the server"),
    )
    .sample("h2")
    .needs(&["link", "link-b"]),
    Knob::new(
        "client",
        |s| text(&s.client),
        |s, v| {
            put(
                &mut s.client,
                ClientProgram::parse(v).map_err(|e| e.to_string()),
            )
        },
    )
    .base("client")
    .side(
        SideKnob::new(
            |o| text(&o.client),
            |o, v| put(&mut o.client, parse::<ClientChoice>(v).map(Some)),
            |o, s| {
                if let Some(c) = &o.client {
                    s.client = c.0.clone();
                }
            },
        )
        .in_file()
        .note(", or `qbench` for its own clients"),
    )
    .sample("curl"),
    Knob::new(
        "server",
        |s| text(&s.server),
        |s, v| {
            put(
                &mut s.server,
                ServerProgram::parse(v).map_err(|e| e.to_string()),
            )
        },
    )
    .base("server")
    .axis("server")
    .side(
        SideKnob::new(
            |o| text(&o.server),
            |o, v| put(&mut o.server, parse::<ServerChoice>(v).map(Some)),
            |o, s| {
                if let Some(c) = &o.server {
                    s.server = c.0.clone();
                }
            },
        )
        .in_file()
        .note(", or `qbench` for the in-process server"),
    )
    .sample("caddy"),
    Knob::new(
        "interval",
        |s| s.interval.map(time),
        |s, v| put(&mut s.interval, duration(v).map(Some)),
    )
    .sample("1s"),
    Knob::new(
        "duration",
        |s| s.load.as_ref().map(|l| time(l.duration)),
        |s, v| put(&mut load(s).duration, duration(v)),
    )
    .sample("5s"),
    Knob::new(
        "warmup",
        |s| {
            s.load
                .as_ref()
                .and_then(|l| differs(l.warmup, Duration::ZERO, time))
        },
        |s, v| put(&mut load(s).warmup, duration(v)),
    )
    .sample("1s")
    .needs(&["duration"]),
    Knob::new(
        "rate",
        |s| s.load.as_ref().and_then(|l| text(&l.rate)),
        |s, v| put(&mut load(s).rate, parse_rate(v).map(Some)),
    )
    .sample("100")
    .needs(&["duration"]),
    Knob::new(
        "arrivals",
        |s| {
            let l = s.load.as_ref().filter(|l| l.rate.is_some())?;
            (l.arrivals == Arrivals::Poisson).then(|| "poisson".into())
        },
        |s, v| {
            let poisson = match v.trim() {
                "poisson" => Arrivals::Poisson,
                "constant" => Arrivals::default(),
                other => return Err(format!("`{other}`: constant or poisson")),
            };
            load(s).arrivals = poisson;
            Ok(())
        },
    )
    .sample("poisson")
    .needs(&["duration", "rate"]),
    Knob::new(
        "max-inflight",
        |s| {
            let l = s.load.as_ref().filter(|l| l.rate.is_some())?;
            differs(l.max_inflight, DEFAULT_MAX_INFLIGHT, |n| n.to_string())
        },
        |s, v| put(&mut load(s).max_inflight, parse(v)),
    )
    .sample("50")
    .needs(&["duration", "rate"]),
    value!("client-threads", client_threads, |n| n.to_string(), |v| {
        count(&THREADS, v)
    })
    .base("client_threads")
    .axis("threads")
    .sample("2"),
    value!("server-threads", server_threads, |n| n.to_string(), |v| {
        count(&THREADS, v)
    })
    .base("server_threads")
    .axis("threads")
    .sample("3"),
    Knob::new(
        "server-cpu",
        |s| text(&s.server_cpu),
        |s, v| put(&mut s.server_cpu, crate::spec::server_cpu::parse_choice(v)),
    )
    .base("server_cpu")
    .axis("server_cpu")
    .sample("deadline:0.5/20ms"),
    switch!("reuse", reuse),
    switch!("resume", resume),
    switch!("0rtt", zero_rtt).axis("zero_rtt"),
    switch!("verify", verify).base("verify"),
    Knob::new(
        "no-telemetry",
        |s| (!s.telemetry).then(String::new),
        |s, v| put(&mut s.telemetry, parse(v).map(|off: bool| !off)),
    )
    .switch(),
];

/// The knob of `--flag`.
pub fn knob(flag: &str) -> Option<&'static Knob> {
    KNOBS.iter().find(|k| k.flag == flag)
}

/// The knobs a side can set, with their per-side half.
pub fn side_knobs() -> impl Iterator<Item = (&'static Knob, &'static SideKnob)> {
    KNOBS.iter().filter_map(|k| k.side.as_ref().map(|s| (k, s)))
}

impl SideOverrides {
    /// `base` with this side's protocol and overrides. 0-RTT is QUIC's: a TCP side keeps TLS
    /// resumption but sends no early data.
    pub fn apply(&self, base: &RunSpec, proto: Protocol) -> RunSpec {
        let mut s = base.clone();
        s.proto = proto;
        s.zero_rtt &= proto.is_quic();
        if !proto.is_quic() {
            s.quic = QuicKnobs::default();
        }
        for (_, side) in side_knobs() {
            (side.apply)(self, &mut s);
        }
        s
    }

    /// `h3 cc=bbr cwnd-cap=430`: the protocol and what this side overrides.
    pub fn label(&self, proto: Protocol) -> String {
        let mut parts = vec![proto.to_string()];
        for (k, side) in side_knobs() {
            if let Some(v) = (side.get)(self) {
                parts.push(format!("{}={v}", k.flag));
            }
        }
        parts.join(" ")
    }
}

#[cfg(test)]
#[path = "knobs_tests.rs"]
mod tests;
