// SPDX-License-Identifier: (MIT OR Apache-2.0)
//
// The edt backend's shaper: on the router's egress toward one end, each packet is given the
// time it may leave (skb->tstamp, CLOCK_MONOTONIC) and sch_fq below holds it until then.
//
//   departure = max(now, busy_until) + wire_bytes / rate     (serialisation at the rate)
//   tstamp    = departure + delay                             (propagation)
//
// busy_until only ever grows and the delay is one constant, so timestamps never go back and
// fq keeps every flow in order. A packet that would wait longer than the queue holds at the
// rate (queue_ns) is dropped, as a full tail-drop queue would. Rate 0 means delay only.
//
// The parameters are const volatile: libbpf makes them a frozen .rodata map, which the
// verifier treats as constants. qbench writes them into a copy of this object before tc
// loads it, found by the magic below (crates/shaper/src/edt.rs).
//
// Built by crates/shaper/build.rs: clang -O2 -g -target bpf (Debian: clang, libbpf-dev).

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>

struct edt_params {
	__u64 magic;
	__u64 rate_bytes_per_s;
	__u64 delay_ns;
	__u64 queue_ns;
};

const volatile struct edt_params params = {
	.magic = 0x7462656e63686564ULL, /* "dehcnebt": unique in the object */
};

__u64 busy_until = 0;
__u64 queue_drops = 0;
__u64 packets = 0;

#define NSEC_PER_SEC 1000000000ULL
#define ETH_OVERHEAD 14
#define CAS_TRIES 8

/* The headers repeated on every segment of a GSO packet: what the wire carries beyond the
 * payload. Falls back to Ethernet + IPv4 + TCP without options. */
static __always_inline __u32 header_bytes(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	__u32 hdr = ETH_OVERHEAD + 20 + 20;

	if ((void *)(ip + 1) > end || eth->h_proto != __constant_htons(ETH_P_IP))
		return hdr;
	__u32 ihl = ip->ihl * 4;
	if (ihl < 20 || ihl > 60)
		return hdr;
	if (ip->protocol == IPPROTO_UDP)
		return ETH_OVERHEAD + ihl + 8;
	if (ip->protocol == IPPROTO_TCP) {
		struct tcphdr *tcp = (void *)ip + ihl;
		if ((void *)(tcp + 1) > end)
			return ETH_OVERHEAD + ihl + 20;
		return ETH_OVERHEAD + ihl + tcp->doff * 4;
	}
	return ETH_OVERHEAD + ihl;
}

/* Bytes as the link carries them: a GSO packet is counted as its segments, each with its
 * own headers, as tbf and the receiver see them. */
static __always_inline __u64 wire_bytes(struct __sk_buff *skb)
{
	__u64 len = skb->len;
	__u32 segs = skb->gso_segs;

	if (segs > 1)
		len += (__u64)(segs - 1) * header_bytes(skb);
	return len;
}

SEC("tc")
int edt(struct __sk_buff *skb)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 rate = params.rate_bytes_per_s;
	__u64 departure = now;

	__sync_fetch_and_add(&packets, 1);
	if (rate) {
		__u64 tx = wire_bytes(skb) * NSEC_PER_SEC / rate;
		int i;

		for (i = 0; i < CAS_TRIES; i++) {
			__u64 prev = busy_until;
			__u64 start = prev > now ? prev : now;

			if (start - now + tx > params.queue_ns) {
				__sync_fetch_and_add(&queue_drops, 1);
				return TC_ACT_SHOT;
			}
			departure = start + tx;
			if (__sync_val_compare_and_swap(&busy_until, prev, departure) == prev)
				break;
		}
	}
	skb->tstamp = departure + params.delay_ns;
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
