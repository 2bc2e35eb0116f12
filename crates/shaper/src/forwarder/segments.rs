//! How many packets a TUN read stands for on the wire. With offloads on, one read can be a GSO
//! super-packet of up to 64 KiB: dropping it drops every segment the receiver would have seen,
//! and the senders declare each of them lost, so the drop counters count segments.

/// `virtio_net_hdr.gso_type` for "not a GSO packet"; the ECN bit (0x80) is a flag on the others.
const GSO_NONE: u8 = 0;

/// Packets on the wire carried by `pkt` (a TUN read, `vnet_len` bytes of `virtio_net_hdr`
/// first): 1 unless the header says GSO, then the L4 payload divided into `gso_size` pieces.
/// Anything it cannot parse counts as 1 packet, which is what the kernel would then send.
pub(super) fn on_wire(pkt: &[u8], vnet_len: usize) -> u64 {
    gso_segments(pkt, vnet_len).unwrap_or(1).max(1)
}

fn gso_segments(pkt: &[u8], vnet_len: usize) -> Option<u64> {
    if vnet_len < 6 {
        return None;
    }
    let gso_type = *pkt.get(1)? & !0x80;
    if gso_type == GSO_NONE {
        return None;
    }
    let gso_size = u16::from_le_bytes([*pkt.get(4)?, *pkt.get(5)?]);
    if gso_size == 0 {
        return None;
    }
    let ip = pkt.get(vnet_len..)?;
    let headers = l3_l4_header_len(ip)?;
    let payload = ip.len().checked_sub(headers)?;
    Some(payload.div_ceil(usize::from(gso_size)) as u64)
}

/// Bytes of IP and TCP/UDP headers at the start of `ip`.
fn l3_l4_header_len(ip: &[u8]) -> Option<usize> {
    let (l3, proto) = match ip.first()? >> 4 {
        4 => (usize::from(ip.first()? & 0x0f) * 4, *ip.get(9)?),
        // Extension headers before TCP/UDP are not sent by the stacks measured here; a packet
        // with them counts as one.
        6 => (40, *ip.get(6)?),
        _ => return None,
    };
    let l4 = match proto {
        6 => usize::from(ip.get(l3 + 12)? >> 4) * 4,
        17 => 8,
        _ => return None,
    };
    (l3 >= 20 && l4 >= 8).then_some(l3 + l4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn vnet(gso_type: u8, gso_size: u16) -> Vec<u8> {
        let mut h = vec![0u8; 10];
        h[1] = gso_type;
        h[4..6].copy_from_slice(&gso_size.to_le_bytes());
        h
    }

    fn ipv4_tcp(payload: usize) -> Vec<u8> {
        let mut p = vec![0u8; 20 + 32 + payload];
        p[0] = 0x45;
        p[9] = 6;
        p[20 + 12] = 8 << 4;
        p
    }

    fn ipv6_udp(payload: usize) -> Vec<u8> {
        let mut p = vec![0u8; 40 + 8 + payload];
        p[0] = 0x60;
        p[6] = 17;
        p
    }

    #[test]
    fn a_tcp_super_packet_counts_its_segments() {
        let mut pkt = vnet(1, 1448);
        pkt.extend(ipv4_tcp(10 * 1448 + 1));
        assert_eq!(on_wire(&pkt, 10), 11);
    }

    #[test]
    fn a_udp_super_packet_counts_its_datagrams() {
        let mut pkt = vnet(5, 1200);
        pkt.extend(ipv6_udp(10 * 1200));
        assert_eq!(on_wire(&pkt, 10), 10);
        // The ECN flag does not make it a different type.
        pkt[1] = 5 | 0x80;
        assert_eq!(on_wire(&pkt, 10), 10);
    }

    #[test]
    fn plain_packets_and_no_vnet_header_count_one() {
        let mut pkt = vnet(0, 1448);
        pkt.extend(ipv4_tcp(3000));
        assert_eq!(on_wire(&pkt, 10), 1);
        assert_eq!(on_wire(&ipv4_tcp(3000), 0), 1);
    }

    #[test]
    fn a_truncated_or_foreign_packet_counts_one() {
        let mut pkt = vnet(1, 1448);
        pkt.extend([0x45, 0, 0]);
        assert_eq!(on_wire(&pkt, 10), 1);
        let mut arp = vnet(1, 1448);
        arp.extend(vec![0x20; 60]);
        assert_eq!(on_wire(&arp, 10), 1);
    }

    proptest! {
        #[test]
        fn any_bytes_give_a_count_never_a_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            vnet_len in 0usize..12,
        ) {
            let n = on_wire(&bytes, vnet_len);
            prop_assert!(n >= 1 && n <= bytes.len().max(1) as u64);
        }
    }
}
