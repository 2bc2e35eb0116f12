//! Several UDP sockets on one port (SO_REUSEPORT), one QUIC endpoint each, so that a server's
//! connections are spread over its threads instead of all passing one socket, one endpoint
//! driver and one endpoint lock.
//!
//! The kernel picks a group's socket by hashing the packet's addresses. A connection whose
//! client address changes (NAT rebinding, a client that moves to a new socket) would hash to
//! another socket, whose endpoint does not know it and would drop its packets. So every
//! endpoint of a group puts its index in the first byte of the connection IDs it issues, and a
//! classic BPF program attached to the group sends each packet to the socket its destination
//! connection ID's first byte names, modulo the group's size. A client's first Initial carries
//! an ID the client chose at random, so new connections spread over the sockets as evenly as
//! the kernel's hash would spread them, and its later handshake packets (which carry the ID our
//! endpoint issued) reach the same socket. The index is visible on the wire, as in QUIC-LB's
//! plaintext server IDs; the other bytes stay random.
//!
//! The program never leaves a packet to the kernel's hash: that hash picks among every socket
//! on the port with SO_REUSEPORT, and any process of the same user may bind one beside ours and
//! be handed a share of the new connections. The kernel numbers a group's sockets in the order
//! they joined, so ours, which join first, are `0..count` and a later one is never picked
//! while ours stay open (a socket that leaves gives its number to the group's last one).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use quinn_proto::{ConnectionId, ConnectionIdGenerator, RandomConnectionIdGenerator};
use socket2::{Domain, Protocol, Socket, Type};

/// Most sockets in a group: the index is one byte of the connection ID.
pub const MAX_SOCKETS: usize = 64;

/// Length of the connection IDs a group's endpoints issue (quinn's default).
const CID_LEN: usize = 8;

/// A UDP socket bound to `addr` alone (a port someone holds is refused, as without a group),
/// with kernel buffers of `buffer` bytes each way where the sysctl maximum allows.
pub fn bind(addr: SocketAddr, buffer: usize) -> io::Result<UdpSocket> {
    let s = socket(addr, buffer)?;
    s.bind(&addr.into())?;
    Ok(s.into())
}

fn socket(addr: SocketAddr, buffer: usize) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Best effort: an unprivileged process gets at most the sysctl maximum.
    let _ = s.set_recv_buffer_size(buffer);
    let _ = s.set_send_buffer_size(buffer);
    Ok(s)
}

/// `first` (made by `bind`) and `count - 1` more sockets on its port, with the steering program
/// attached to the group; `first` first. The order is the group's: socket `i` gets the
/// short-header packets whose connection ID starts with `i`. `first` was bound alone, so the
/// port was nobody else's; SO_REUSEPORT is set on it only now, for ours to join.
pub fn group(first: UdpSocket, count: usize, buffer: usize) -> io::Result<Vec<UdpSocket>> {
    if !(1..=MAX_SOCKETS).contains(&count) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{count} sockets: between 1 and {MAX_SOCKETS}"),
        ));
    }
    if count == 1 {
        return Ok(vec![first]);
    }
    let addr = first.local_addr()?;
    let first = Socket::from(first);
    first.set_reuse_port(true)?;
    let mut all = vec![UdpSocket::from(first)];
    for _ in 1..count {
        let s = socket(addr, buffer)?;
        s.set_reuse_port(true)?;
        s.bind(&addr.into())?;
        all.push(s.into());
    }
    steer(&all[0], count)?;
    Ok(all)
}

/// Attaches the program that picks one of the group's first `count` sockets by the first byte
/// of a packet's destination connection ID. The kernel hands it the UDP payload; a load past a
/// short datagram's end ends the program with 0, socket 0: ours too.
fn steer(sock: &UdpSocket, count: usize) -> io::Result<()> {
    const LD_B_ABS: u16 = 0x30; // BPF_LD | BPF_B | BPF_ABS
    const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
    const JA: u16 = 0x05; // BPF_JMP | BPF_JA
    const MOD_K: u16 = 0x94; // BPF_ALU | BPF_MOD | BPF_K
    const RET_A: u16 = 0x16; // BPF_RET | BPF_A
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let mut prog = [
        // The header form bit: set for a long header.
        op(LD_B_ABS, 0, 0, 0),
        op(JSET_K, 2, 0, 0x80),
        // Short header: the destination connection ID starts at byte 1.
        op(LD_B_ABS, 0, 0, 1),
        op(JA, 0, 0, 1),
        // Long header: after the form byte, 4 bytes of version and the ID's length byte.
        op(LD_B_ABS, 0, 0, 6),
        op(MOD_K, 0, 0, count as u32),
        op(RET_A, 0, 0, 0),
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // The kernel copies the program: `prog` need only outlive the call.
    crate::sockopt::set(
        sock,
        libc::SOL_SOCKET,
        libc::SO_ATTACH_REUSEPORT_CBPF,
        &fprog,
    )
}

/// Connection IDs whose first byte is this endpoint's index in its group, the rest random.
#[derive(Debug)]
pub struct IndexedCids {
    index: u8,
    random: RandomConnectionIdGenerator,
}

impl IndexedCids {
    /// What quinn's `EndpointConfig::cid_generator` takes, for socket `index` of a group.
    pub fn factory(index: usize) -> impl Fn() -> Box<dyn ConnectionIdGenerator> + Send + Sync {
        let index = u8::try_from(index).unwrap_or(u8::MAX);
        move || {
            Box::new(Self {
                index,
                random: RandomConnectionIdGenerator::new(CID_LEN),
            })
        }
    }
}

impl ConnectionIdGenerator for IndexedCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let random = self.random.generate_cid();
        let mut bytes = [0u8; CID_LEN];
        bytes.copy_from_slice(&random[..CID_LEN]);
        bytes[0] = self.index;
        ConnectionId::new(&bytes)
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// quinn's endpoint settings for socket `index` of a group of `count`: `base`, with connection
/// IDs that name the socket when there is more than one.
pub fn endpoint_config(
    base: quinn::EndpointConfig,
    index: usize,
    count: usize,
) -> quinn::EndpointConfig {
    let mut c = base;
    if count > 1 {
        c.cid_generator(IndexedCids::factory(index));
    }
    c
}

/// The number of sockets a server with `threads` runtime threads binds: one per thread.
pub fn sockets_for(threads: usize) -> usize {
    threads.clamp(1, MAX_SOCKETS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_their_socket_and_vary_otherwise() {
        let make = IndexedCids::factory(3);
        let mut g = make();
        let a = g.generate_cid();
        let b = g.generate_cid();
        assert_eq!((a.len(), a[0], b[0]), (CID_LEN, 3, 3));
        assert_ne!(a[1..], b[1..]);
    }

    #[test]
    fn a_group_shares_one_port_and_takes_the_program() {
        let first = bind("127.0.0.1:0".parse().unwrap(), 0).unwrap();
        let port = first.local_addr().unwrap().port();
        let all = group(first, 3, 0).unwrap();
        assert_eq!(all.len(), 3);
        assert!(all.iter().all(|s| s.local_addr().unwrap().port() == port));
        // Only ours join: a socket without the option is refused the port.
        let taken = all[0].local_addr().unwrap();
        assert!(bind(taken, 0).is_err());
        let none = bind("127.0.0.1:0".parse().unwrap(), 0).unwrap();
        assert!(group(none, MAX_SOCKETS + 1, 0).is_err());
    }

    /// A short-header datagram goes to the socket its connection ID's first byte names,
    /// whichever source port it comes from.
    #[test]
    fn short_headers_reach_the_socket_their_id_names() {
        let first = bind("127.0.0.1:0".parse().unwrap(), 0).unwrap();
        let to = first.local_addr().unwrap();
        let all = group(first, 2, 0).unwrap();
        for s in &all {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        }
        for src in 0..8u8 {
            let client = UdpSocket::bind("127.0.0.1:0").unwrap();
            let which = usize::from(src % 2);
            client.send_to(&[0x40, which as u8, src], to).unwrap();
            let mut buf = [0u8; 16];
            let n = all[which].recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &[0x40, which as u8, src], "socket {which}");
        }
    }

    /// Long headers (a new connection's Initial) go to the socket the destination connection
    /// ID's first byte names too, modulo the group, and never to a socket that joined the port
    /// after ours: another process of the same user may bind one there.
    #[test]
    fn handshakes_reach_only_the_groups_own_sockets() {
        let first = bind("127.0.0.1:0".parse().unwrap(), 0).unwrap();
        let to = first.local_addr().unwrap();
        let all = group(first, 2, 0).unwrap();
        let foreign = socket(to, 0).unwrap();
        foreign.set_reuse_port(true).unwrap();
        foreign
            .bind(&to.into())
            .expect("the same user may join the port");
        let foreign = UdpSocket::from(foreign);
        for s in all.iter().chain([&foreign]) {
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
        }
        let mut buf = [0u8; 64];
        // Each from a new source port, which the kernel's hash would spread over all three.
        for src in 0..24u8 {
            let client = UdpSocket::bind("127.0.0.1:0").unwrap();
            // Initial, version 1, an 8-byte destination ID starting with `src`.
            let dcid_first = src.wrapping_mul(37);
            let packet = [0xc0, 0, 0, 0, 1, 8, dcid_first, 1, 2, 3, 4, 5, 6, 7, src];
            client.send_to(&packet, to).unwrap();
            let which = usize::from(dcid_first % 2);
            let n = all[which].recv(&mut buf).unwrap_or_else(|e| {
                panic!("packet {src}: socket {which} got nothing ({e})");
            });
            assert_eq!(&buf[..n], &packet, "socket {which}");
        }
        // Datagrams too short to hold the byte go to socket 0, not to the hash.
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.send_to(&[0xc0, 0, 0], to).unwrap();
        assert_eq!(all[0].recv(&mut buf).unwrap(), 3);
        assert!(
            foreign.recv(&mut buf).is_err(),
            "the foreign socket got one"
        );
    }
}
