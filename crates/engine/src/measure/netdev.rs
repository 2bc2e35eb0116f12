//! The interface a run's packets leave by, as the calling thread's network namespace sees it:
//! its MTU (sysfs), offloads (the ethtool ioctl) and root qdisc (`tc`).

use std::net::{IpAddr, SocketAddr};
use std::process::Command;

use qbench_core::report::env_checks::InterfaceInfo;

/// `ethtool_value`, the argument of the legacy get-one-flag ethtool commands.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_GGRO: u32 = 0x2b;

/// One offload flag of `dev`, `None` where the kernel would not say.
fn offload(dev: &str, cmd: u32) -> Option<bool> {
    let name = dev.as_bytes();
    if name.len() >= libc::IFNAMSIZ {
        return None;
    }
    // SAFETY: a datagram socket only to carry the ioctl; closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    let mut value = EthtoolValue { cmd, data: 0 };
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    req.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
    // SAFETY: SIOCETHTOOL reads the name and writes `value`, which outlives the call.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCETHTOOL, &mut req) };
    // SAFETY: our own descriptor.
    unsafe { libc::close(fd) };
    (rc == 0).then_some(value.data != 0)
}

fn mtu(dev: &str) -> Option<u32> {
    std::fs::read_to_string(format!("/sys/class/net/{dev}/mtu"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The root qdisc's kind, from `tc qdisc show dev DEV`'s first line (`qdisc noqueue 0: root`).
fn qdisc(dev: &str) -> Option<String> {
    let out = Command::new("tc")
        .args(["qdisc", "show", "dev", dev])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains(" root"))?;
    line.split_whitespace().nth(1).map(str::to_string)
}

/// The device `ip route get ADDR` names.
fn route_dev(addr: IpAddr) -> Option<String> {
    let out = Command::new("ip")
        .args(["-o", "route", "get", &addr.to_string()])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    words.find(|w| *w == "dev")?;
    words.next().map(str::to_string)
}

/// The interface towards `peer`: loopback, the emulated link's end (`link`), or the route's.
pub(crate) fn towards(peer: SocketAddr, link: bool) -> Option<InterfaceInfo> {
    let ip = peer.ip();
    let (name, role) = if ip.is_loopback() {
        ("lo".to_string(), "loopback")
    } else {
        (route_dev(ip)?, if link { "link" } else { "route" })
    };
    Some(InterfaceInfo {
        mtu: mtu(&name),
        gso: offload(&name, ETHTOOL_GGSO),
        tso: offload(&name, ETHTOOL_GTSO),
        gro: offload(&name, ETHTOOL_GGRO),
        qdisc: qdisc(&name),
        role: role.into(),
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_described_and_an_unknown_device_is_not() {
        let lo = towards("127.0.0.1:443".parse().unwrap(), false).unwrap();
        assert_eq!((lo.name.as_str(), lo.role.as_str()), ("lo", "loopback"));
        assert_eq!(lo.mtu, Some(65536));
        // Loopback segments in software and never queues.
        assert_eq!(lo.gso, Some(true));
        assert_eq!(lo.qdisc.as_deref(), Some("noqueue"));
        assert_eq!(offload("qb-none-such", ETHTOOL_GGSO), None);
        assert_eq!(
            offload("a-name-far-too-long-for-ifnamsiz", ETHTOOL_GGSO),
            None
        );
        assert_eq!(mtu("qb-none-such"), None);
    }
}
