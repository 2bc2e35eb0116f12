//! `--a.X` and `--b.X`: what one side of `qbench compare` changes from the common flags.

use clap::Args;
use qbench_core::client_program::ClientChoice;
use qbench_core::spec::SideOverrides;
use qbench_core::units::ByteSize;
use qbench_core::CcAlgo;

use crate::flags::values::{parse_rwnd, parse_side_cpu};
use qbench_core::spec::bounds::{CONNECTIONS, STREAMS, WINDOW_PACKETS};
use qbench_core::spec::cpulimit::CpuQuota;

macro_rules! side_args {
    ($name:ident, $cc:literal, $cap:literal, $init:literal, $rwnd:literal, $conns:literal, $streams:literal, $cpu:literal, $proxy:literal, $client:literal) => {
        #[derive(Debug, Args)]
        pub struct $name {
            /// --cc for this side
            #[arg(long = $cc, id = $cc, value_enum)]
            pub cc: Option<CcAlgo>,
            /// --cwnd-cap for this side
            #[arg(long = $cap, id = $cap, value_name = "PACKETS", value_parser = WINDOW_PACKETS.value_parser())]
            pub cwnd_cap: Option<u32>,
            /// --initial-cwnd for this side
            #[arg(long = $init, id = $init, value_name = "PACKETS", value_parser = WINDOW_PACKETS.value_parser())]
            pub initial_cwnd: Option<u32>,
            /// --rwnd for this side
            #[arg(long = $rwnd, id = $rwnd, value_name = "BYTES", value_parser = parse_rwnd)]
            pub rwnd: Option<ByteSize>,
            /// --connections for this side
            #[arg(long = $conns, id = $conns, value_parser = CONNECTIONS.value_parser())]
            pub connections: Option<u32>,
            /// --streams for this side
            #[arg(long = $streams, id = $streams, value_parser = STREAMS.value_parser())]
            pub streams: Option<u32>,
            /// --client-cpu for this side, or `none` for no quota
            #[arg(long = $cpu, id = $cpu, value_name = "FRACTION", value_parser = parse_side_cpu)]
            pub client_cpu: Option<CpuQuota>,
            /// --proxy for this side (h2, h3), or `none` to go straight to the server
            #[arg(long = $proxy, id = $proxy, value_name = "PROTO", value_parser = crate::flags::chain::parse_side_proxy)]
            pub proxy: Option<qbench_core::spec::ProxyChoice>,
            /// --client for this side, or `qbench` for its own clients
            #[arg(long = $client, id = $client, value_name = "NAME", value_parser = |s: &str| s.parse::<ClientChoice>().map_err(|e| e.to_string()))]
            pub client: Option<ClientChoice>,
        }

        impl From<&$name> for SideOverrides {
            fn from(s: &$name) -> Self {
                SideOverrides {
                    cc: s.cc,
                    cwnd_cap: s.cwnd_cap,
                    initial_cwnd: s.initial_cwnd,
                    rwnd: s.rwnd,
                    connections: s.connections,
                    streams: s.streams,
                    client_cpu: s.client_cpu,
                    proxy: s.proxy,
                    client: s.client.clone(),
                }
            }
        }
    };
}

side_args!(
    SideA,
    "a.cc",
    "a.cwnd-cap",
    "a.initial-cwnd",
    "a.rwnd",
    "a.connections",
    "a.streams",
    "a.client-cpu",
    "a.proxy",
    "a.client"
);
side_args!(
    SideB,
    "b.cc",
    "b.cwnd-cap",
    "b.initial-cwnd",
    "b.rwnd",
    "b.connections",
    "b.streams",
    "b.client-cpu",
    "b.proxy",
    "b.client"
);
