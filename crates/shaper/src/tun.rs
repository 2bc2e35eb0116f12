//! A Linux TUN device opened through `/dev/net/tun` with raw ioctls.
//!
//! With `vnet_hdr`, every packet read or written is prefixed by a 10-byte `virtio_net_hdr`,
//! and segmentation offloads are switched on so the kernel can hand over (and take back) GSO
//! super-packets of up to 64 KiB: one syscall then moves ~40 MTU-sized segments, which is what
//! makes a userspace forwarder fast enough for multi-gigabit TCP.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;

const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;

pub const TUN_F_CSUM: u32 = 0x01;
pub const TUN_F_TSO4: u32 = 0x02;
pub const TUN_F_TSO6: u32 = 0x04;
pub const TUN_F_TSO_ECN: u32 = 0x08;
pub const TUN_F_UFO: u32 = 0x10;
pub const TUN_F_USO4: u32 = 0x20;
pub const TUN_F_USO6: u32 = 0x40;

/// Size of `struct virtio_net_hdr`, the prefix of every packet when `vnet_hdr` is on.
pub const VNET_HDR_LEN: usize = 10;

/// Offload sets to try, richest first. Older kernels reject unknown bits with EINVAL (USO
/// arrived in 6.2), so each step drops what the previous kernel generation lacked.
const OFFLOAD_CANDIDATES: [u32; 4] = [
    TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN | TUN_F_USO4 | TUN_F_USO6,
    TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN,
    TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6,
    TUN_F_CSUM,
];

const IFNAMSIZ: usize = 16;

/// `struct ifreq` as TUNSETIFF reads it: the name, then the flags member of the union.
#[repr(C)]
struct IfReq {
    name: [libc::c_char; IFNAMSIZ],
    flags: libc::c_short,
    // The kernel copies the whole 40-byte ifreq, so the union's remaining bytes must exist.
    _pad: [u8; 22],
}

/// An open TUN device (IFF_TUN | IFF_NO_PI, plus IFF_VNET_HDR when `vnet_hdr`), created by
/// name if it does not exist. The device lives in the network namespace of the thread that
/// opened it; a non-persistent device disappears when this is dropped.
///
/// The descriptor is non-blocking: [`Tun::recv`] returns `WouldBlock` when no packet is queued,
/// so a reader can wait in `poll()` and still notice a stop request.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
    vnet_hdr: bool,
    offload_flags: u32,
}

impl Tun {
    pub fn open(name: &str, vnet_hdr: bool) -> io::Result<Self> {
        let mut ifr = ifreq_for(name)?;
        let fd = open_clone_device()?;
        ifr.flags = IFF_TUN | IFF_NO_PI | if vnet_hdr { IFF_VNET_HDR } else { 0 };
        // SAFETY: `fd` is an open /dev/net/tun descriptor and `ifr` is a live, correctly sized
        // ifreq that the kernel reads and writes back (the assigned name) during the call.
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut ifr as *mut IfReq) };
        if rc < 0 {
            return Err(with_context(
                io::Error::last_os_error(),
                &format!("TUNSETIFF {name}"),
            ));
        }
        let name = name_from(&ifr);
        let offload_flags = if vnet_hdr {
            set_vnet_hdr_len(&fd)?;
            enable_offloads(&fd)
        } else {
            0
        };
        Ok(Self {
            fd,
            name,
            vnet_hdr,
            offload_flags,
        })
    }

    /// The interface name the kernel assigned (equal to the requested one unless that was
    /// empty or a pattern like `tun%d`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// true when IFF_VNET_HDR + TUNSETOFFLOAD(TUN_F_CSUM|TUN_F_TSO4|TUN_F_TSO6|TUN_F_USO4|TUN_F_USO6
    /// as the kernel accepts; fall back to fewer flags) succeeded, so the kernel may hand us GSO
    /// super-packets up to 64 KiB each prefixed by a 10-byte virtio_net_hdr that must be written
    /// back unchanged.
    pub fn offloads(&self) -> bool {
        self.offload_flags != 0
    }

    /// The `TUN_F_*` set the kernel accepted; 0 without offloads.
    pub fn offload_flags(&self) -> u32 {
        self.offload_flags
    }

    /// Bytes of `virtio_net_hdr` in front of every packet: [`VNET_HDR_LEN`] or 0.
    pub fn vnet_hdr_len(&self) -> usize {
        if self.vnet_hdr {
            VNET_HDR_LEN
        } else {
            0
        }
    }

    /// Reads one packet (with its vnet header, if any). `buf` should hold 64 KiB plus the
    /// header, or a GSO super-packet is cut short.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the duration of the call,
        // and the descriptor is owned by `self`.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }

    /// Writes one packet (with its vnet header, if any) for the kernel to route on.
    pub fn send(&self, pkt: &[u8]) -> io::Result<usize> {
        // SAFETY: `pkt` is valid for reads of `pkt.len()` bytes for the duration of the call,
        // and the descriptor is owned by `self`.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), pkt.as_ptr().cast(), pkt.len()) };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Tun {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn with_context(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn ifreq_for(name: &str) -> io::Result<IfReq> {
    if name.len() >= IFNAMSIZ
        || name
            .bytes()
            .any(|b| b == 0 || b == b'/' || b.is_ascii_whitespace())
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "invalid interface name {name:?} (at most {} bytes)",
                IFNAMSIZ - 1
            ),
        ));
    }
    let mut ifr = IfReq {
        name: [0; IFNAMSIZ],
        flags: 0,
        _pad: [0; 22],
    };
    for (dst, src) in ifr.name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    Ok(ifr)
}

fn name_from(ifr: &IfReq) -> String {
    let bytes: Vec<u8> = ifr
        .name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn open_clone_device() -> io::Result<OwnedFd> {
    let flags = libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: the path is a NUL-terminated C string literal; open has no other preconditions.
    let fd = unsafe { libc::open(c"/dev/net/tun".as_ptr(), flags) };
    if fd < 0 {
        return Err(with_context(
            io::Error::last_os_error(),
            "opening /dev/net/tun",
        ));
    }
    // SAFETY: `fd` was just returned by open, is valid, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Pins the header at the classic 10 bytes: we pass headers through opaquely, and a longer
/// (mergeable-buffers) layout left by a previous user of a persistent device would shift data.
fn set_vnet_hdr_len(fd: &OwnedFd) -> io::Result<()> {
    let len = VNET_HDR_LEN as libc::c_int;
    // SAFETY: TUNSETVNETHDRSZ reads one c_int through the pointer, which is live for the call.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            TUNSETVNETHDRSZ as _,
            &len as *const libc::c_int,
        )
    };
    if rc < 0 {
        return Err(with_context(io::Error::last_os_error(), "TUNSETVNETHDRSZ"));
    }
    Ok(())
}

/// Returns the first offload set the kernel accepts, or 0 if it takes none.
fn enable_offloads(fd: &OwnedFd) -> u32 {
    for flags in OFFLOAD_CANDIDATES {
        // SAFETY: TUNSETOFFLOAD takes its argument by value; no memory is passed.
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD as _, flags as libc::c_ulong) };
        if rc == 0 {
            return flags;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ifreq_layout_matches_the_kernel() {
        assert_eq!(size_of::<IfReq>(), 40);
    }

    #[test]
    fn names_are_validated() {
        assert!(ifreq_for("fwup").is_ok());
        assert!(ifreq_for("").is_ok(), "empty lets the kernel pick tun%d");
        assert!(ifreq_for("0123456789abcdef").is_err());
        assert!(ifreq_for("a b").is_err());
        assert!(ifreq_for("a/b").is_err());
    }

    #[test]
    fn name_round_trips() {
        let ifr = ifreq_for("fwdn").expect("valid");
        assert_eq!(name_from(&ifr), "fwdn");
    }
}
