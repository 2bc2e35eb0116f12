//! glibc's `memcpy` at the size of TLS records, made as fast in every run as in the best one.
//!
//! glibc (2.36 in Debian 12) copies with `rep movsb` from 2112 bytes up on CPUs with fast string
//! moves (ERMS). On AMD cores that instruction can run 30-40 times slower when the destination lies
//! 1 to 15 bytes past the source modulo 4096: 2.2-2.8 GB/s instead of about 100 for 4-64 KiB
//! copies, measured on an AMD EPYC of family 0x19 (Zen 4). glibc bug 30994 is
//! this; glibc since stops using `rep movsb` on AMD CPUs below its non-temporal threshold.
//! Whether a TLS read path's two buffers sit that way is settled once per run by where the
//! allocator put them, so qbench's HTTP/2 client took either 0.19-0.27 or 0.43-0.60 s of user
//! CPU per GB, run by run, and no cost model could match both. The threshold is a glibc tunable
//! read only when a process starts, so on AMD CPUs with ERMS each binary starts itself once more
//! with it raised past any copy a transfer makes ([`RAISED_TO`]), as newer glibc would have it,
//! then puts `GLIBC_TUNABLES` back as it found it for the programs it runs.
//! `QBENCH_REP_MOVSB=keep` leaves glibc's choice alone (`raise`, or unset, is the default;
//! any other value is refused with a one-line error before the binary does anything else).

use std::sync::OnceLock;

/// The glibc tunable that decides from which size `memcpy` uses `rep movsb`.
pub const TUNABLE: &str = "glibc.cpu.x86_rep_movsb_threshold";
/// 16 MiB: above every copy a transfer makes, so they all take glibc's vector loops.
pub const RAISED_TO: &str = "0x1000000";
/// Set to `keep` to leave glibc's threshold as it is, `raise` (the default) to raise it.
pub const KEEP_VAR: &str = "QBENCH_REP_MOVSB";
/// Carries `GLIBC_TUNABLES` as it was across the restart: `-` when it was unset, else `=` and
/// its value.
const BEFORE_VAR: &str = "QBENCH_GLIBC_TUNABLES_BEFORE";
const UNSET: &str = "-";

/// What `/proc/cpuinfo` says about the first CPU, as far as the threshold is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cpu {
    pub vendor: String,
    /// Enhanced `rep movsb`: glibc uses the instruction only when this is set.
    pub erms: bool,
}

impl Cpu {
    /// AMD with ERMS: the CPUs on which newer glibc no longer uses `rep movsb`, for this.
    pub fn slows_on_page_aliasing(&self) -> bool {
        self.vendor == "AuthenticAMD" && self.erms
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CpuInfoError {
    #[error("/proc/cpuinfo: no `{0}` line for the first CPU")]
    Missing(&'static str),
}

/// Reads the first CPU's block of `/proc/cpuinfo`.
pub fn parse_cpuinfo(text: &str) -> Result<Cpu, CpuInfoError> {
    let first = text.split("\n\n").next().unwrap_or_default();
    let field = |name: &'static str| {
        first
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim())
            })
            .ok_or(CpuInfoError::Missing(name))
    };
    Ok(Cpu {
        vendor: field("vendor_id")?.to_string(),
        erms: field("flags")?.split_whitespace().any(|f| f == "erms"),
    })
}

/// The value a `GLIBC_TUNABLES` string gives [`TUNABLE`], if it gives one.
pub fn tunable_in(tunables: &str) -> Option<&str> {
    tunables.split(':').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == TUNABLE).then_some(v)
    })
}

/// `GLIBC_TUNABLES` with the threshold raised, the other tunables kept.
pub fn with_raised(tunables: Option<&str>) -> String {
    match tunables {
        Some(t) if !t.is_empty() => format!("{t}:{TUNABLE}={RAISED_TO}"),
        _ => format!("{TUNABLE}={RAISED_TO}"),
    }
}

/// What the process copies with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// glibc's own choice, on a CPU without the slowdown (or not glibc on x86-64 Linux).
    Default,
    /// Raised by this module at start.
    Raised,
    /// Set by the user's `GLIBC_TUNABLES`, left as it is.
    User(String),
    /// Left to glibc on an affected CPU because of `QBENCH_REP_MOVSB=keep`.
    Kept,
    /// Left to glibc on an affected CPU because starting again failed.
    RestartFailed(String),
}

impl State {
    /// For the report's environment; `None` where glibc's choice is not in question.
    pub fn describe(&self) -> Option<String> {
        const WHY: &str = "rep movsb slows on page aliasing on this CPU";
        match self {
            Self::Default => None,
            Self::Raised => Some(format!("{RAISED_TO}, raised by qbench: {WHY}")),
            Self::User(v) => Some(format!("{v}, from GLIBC_TUNABLES")),
            Self::Kept => Some(format!(
                "glibc's default, kept by {KEEP_VAR}=keep although {WHY}"
            )),
            Self::RestartFailed(e) => Some(format!(
                "glibc's default although {WHY}: starting again with it raised failed: {e}"
            )),
        }
    }
}

/// What [`KEEP_VAR`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Raise,
    Keep,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{KEEP_VAR}: `{0}` is neither `keep` nor `raise`")]
pub struct BadChoice(String);

/// [`KEEP_VAR`]'s value; unset or empty is [`Choice::Raise`].
pub fn parse_choice(value: Option<&std::ffi::OsStr>) -> Result<Choice, BadChoice> {
    match value.map(|v| v.to_str()) {
        None => Ok(Choice::Raise),
        Some(Some("" | "raise")) => Ok(Choice::Raise),
        Some(Some("keep")) => Ok(Choice::Keep),
        Some(v) => Err(BadChoice(
            v.unwrap_or("(not UTF-8)").chars().take(40).collect(),
        )),
    }
}

/// What a binary does at start.
#[derive(Debug, PartialEq, Eq)]
pub enum Start {
    /// Start again with this `GLIBC_TUNABLES`.
    Restart(String),
    Stay(State),
}

/// For a process not yet started again; `cpu` is `None` where `/proc/cpuinfo` could not be
/// read.
pub fn decide(cpu: Option<&Cpu>, tunables: Option<&str>, choice: Choice) -> Start {
    if let Some(v) = tunables.and_then(tunable_in) {
        return Start::Stay(State::User(v.to_string()));
    }
    if !cpu.is_some_and(Cpu::slows_on_page_aliasing) {
        return Start::Stay(State::Default);
    }
    if choice == Choice::Keep {
        return Start::Stay(State::Kept);
    }
    Start::Restart(with_raised(tunables))
}

static STATE: OnceLock<State> = OnceLock::new();

/// The state [`at_start`] settled on; [`State::Default`] if it was not called.
pub fn state() -> &'static State {
    STATE.get_or_init(|| State::Default)
}

/// Call first in `main`, before any thread exists (it changes the environment). May not
/// return: the process then starts again, same pid, arguments and descriptors.
pub fn at_start() -> Result<(), BadChoice> {
    let choice = parse_choice(std::env::var_os(KEEP_VAR).as_deref())?;
    let _ = STATE.set(settle(choice));
    Ok(())
}

/// [`at_start`] for a binary: a bad [`KEEP_VAR`] ends it with a one-line error and status 2,
/// as a bad flag does.
pub fn at_start_or_exit() {
    if let Err(e) = at_start() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
fn settle(choice: Choice) -> State {
    if let Some(before) = std::env::var_os(BEFORE_VAR) {
        restore(&before);
        return State::Raised;
    }
    let tunables = match std::env::var_os("GLIBC_TUNABLES") {
        None => None,
        Some(t) => match t.into_string() {
            Ok(t) => Some(t),
            // Not ours to rewrite.
            Err(_) => return State::Default,
        },
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| parse_cpuinfo(&t).ok());
    match decide(cpu.as_ref(), tunables.as_deref(), choice) {
        Start::Stay(s) => s,
        Start::Restart(new) => State::RestartFailed(restart(&new, tunables.as_deref()).to_string()),
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64")))]
fn settle(_: Choice) -> State {
    State::Default
}

/// Returns only if `exec` failed.
#[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
fn restart(tunables: &str, before: Option<&str>) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    // The binary's own path rather than /proc/self/exe, which would rename the process `exe`.
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => return e,
    };
    let mut args = std::env::args_os();
    let mut cmd = std::process::Command::new(exe);
    if let Some(arg0) = args.next() {
        cmd.arg0(arg0);
    }
    let before = before.map_or_else(|| UNSET.to_string(), |b| format!("={b}"));
    cmd.args(args)
        .env("GLIBC_TUNABLES", tunables)
        .env(BEFORE_VAR, before)
        .exec()
}

#[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
fn restore(before: &std::ffi::OsStr) {
    use std::os::unix::ffi::OsStrExt;
    match before.as_bytes() {
        b if b == UNSET.as_bytes() => std::env::remove_var("GLIBC_TUNABLES"),
        [b'=', value @ ..] => {
            std::env::set_var("GLIBC_TUNABLES", std::ffi::OsStr::from_bytes(value))
        }
        _ => {}
    }
    std::env::remove_var(BEFORE_VAR);
}

#[cfg(test)]
mod tests;
