//! The kernel's `/proc/net` text files read into a namespace's counters: `snmp` and `netstat`
//! (each group's line of names, then its line of values) and `dev` (a line an interface under
//! a two-line header). Each reading is a value or an error naming what did not fit.

use std::collections::BTreeMap;

use crate::report::net_counters::{NetCounters, TcpExtCounters};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProcNetError {
    #[error("/proc/net/{file} has no `{counter}` counter")]
    Missing {
        file: &'static str,
        counter: &'static str,
    },
    #[error("/proc/net/{file} has no `{group}` lines")]
    NoGroup {
        file: &'static str,
        group: &'static str,
    },
    #[error("/proc/net/{file}: `{group}` holds {names} names and {values} values")]
    Uneven {
        file: &'static str,
        group: String,
        names: usize,
        values: usize,
    },
    #[error("/proc/net/dev has no header naming its receive and transmit `drop` columns")]
    DevHeader,
    #[error("/proc/net/dev: `{iface}` holds {values} values where the header names {columns}")]
    DevUneven {
        iface: String,
        values: usize,
        columns: usize,
    },
    #[error("/proc/net/dev: `{iface}`'s `{value}` is not a count")]
    DevValue { iface: String, value: String },
}

/// Each group's counters by name, from lines of names each followed by its line of values
/// (`Udp: InDatagrams NoPorts ...`, then `Udp: 15107472 526 ...`).
fn groups<'a>(
    file: &'static str,
    text: &'a str,
) -> Result<BTreeMap<&'a str, BTreeMap<&'a str, u64>>, ProcNetError> {
    let mut out: BTreeMap<&str, BTreeMap<&str, u64>> = BTreeMap::new();
    let mut names: Option<(&str, Vec<&str>)> = None;
    for line in text.lines() {
        let Some((group, rest)) = line.split_once(':') else {
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        match names.take() {
            Some((g, n)) if g == group => {
                if n.len() != words.len() {
                    return Err(ProcNetError::Uneven {
                        file,
                        group: group.to_string(),
                        names: n.len(),
                        values: words.len(),
                    });
                }
                let counters = out.entry(group).or_default();
                for (name, v) in n.into_iter().zip(words) {
                    // A signed counter (MaxConn is -1) is not one read here.
                    if let Ok(v) = v.parse::<u64>() {
                        counters.insert(name, v);
                    }
                }
            }
            _ => names = Some((group, words)),
        }
    }
    Ok(out)
}

impl NetCounters {
    /// From the text of `/proc/net/snmp`.
    pub fn parse_snmp(text: &str) -> Result<Self, ProcNetError> {
        let groups = groups("snmp", text)?;
        let get = |counter: &'static str| {
            let (group, name) = counter.split_once('.').unwrap_or(("", counter));
            groups
                .get(group)
                .and_then(|g| g.get(name))
                .copied()
                .ok_or(ProcNetError::Missing {
                    file: "snmp",
                    counter,
                })
        };
        Ok(Self {
            udp_in_datagrams: get("Udp.InDatagrams")?,
            udp_out_datagrams: get("Udp.OutDatagrams")?,
            udp_rcvbuf_errors: get("Udp.RcvbufErrors")?,
            udp_sndbuf_errors: get("Udp.SndbufErrors")?,
            udp_in_errors: get("Udp.InErrors")?,
            tcp_out_segs: get("Tcp.OutSegs")?,
            tcp_retrans_segs: get("Tcp.RetransSegs")?,
            tcp_ext: None,
            nic_rx_dropped: None,
            nic_tx_dropped: None,
        })
    }

    /// A namespace's counters from its files' text: `snmp`'s are needed; `netstat`'s and
    /// `dev`'s are absent where a file was not read or did not make sense, so that a kernel
    /// without one still says what `snmp` holds.
    pub fn from_files(
        snmp: &str,
        netstat: Option<&str>,
        dev: Option<&str>,
    ) -> Result<Self, ProcNetError> {
        let nic = dev.and_then(|t| NicDrops::parse_dev(t).ok());
        Ok(Self {
            tcp_ext: netstat.and_then(|t| TcpExtCounters::parse_netstat(t).ok()),
            nic_rx_dropped: nic.map(|n| n.rx),
            nic_tx_dropped: nic.map(|n| n.tx),
            ..Self::parse_snmp(snmp)?
        })
    }
}

impl TcpExtCounters {
    /// From the text of `/proc/net/netstat`: its `TcpExt` lines must be there, and a name
    /// missing from them is one this kernel never counted.
    pub fn parse_netstat(text: &str) -> Result<Self, ProcNetError> {
        let groups = groups("netstat", text)?;
        let tcp = groups.get("TcpExt").ok_or(ProcNetError::NoGroup {
            file: "netstat",
            group: "TcpExt",
        })?;
        let get = |name: &str| tcp.get(name).copied().unwrap_or(0);
        Ok(Self {
            tcp_lost_retransmit: get("TCPLostRetransmit"),
            tcp_timeouts: get("TCPTimeouts"),
            tcp_spurious_rtos: get("TCPSpuriousRTOs"),
            tcp_backlog_drop: get("TCPBacklogDrop"),
            tcp_rcvq_drop: get("TCPRcvQDrop"),
            tcp_ofo_queue: get("TCPOFOQueue"),
            tcp_ofo_drop: get("TCPOFODrop"),
            tcp_zero_window_drop: get("TCPZeroWindowDrop"),
            tcp_listen_drops: get("ListenDrops"),
        })
    }
}

/// Packets the interfaces other than `lo` dropped, from `/proc/net/dev`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NicDrops {
    pub rx: u64,
    pub tx: u64,
}

/// Where the `drop` columns are, counted over the receive and then the transmit columns.
#[derive(Debug, Clone, Copy)]
struct DevColumns {
    rx_drop: usize,
    tx_drop: usize,
    count: usize,
}

impl DevColumns {
    /// From the header line that names the columns (` face |bytes ... drop ...|bytes ...`);
    /// `None` from any other line.
    fn of(line: &str) -> Option<Self> {
        let mut parts = line.split('|').skip(1);
        let rx: Vec<&str> = parts.next()?.split_whitespace().collect();
        let tx: Vec<&str> = parts.next()?.split_whitespace().collect();
        let drop = |cols: &[&str]| cols.iter().position(|c| *c == "drop");
        Some(Self {
            rx_drop: drop(&rx)?,
            tx_drop: rx.len() + drop(&tx)?,
            count: rx.len() + tx.len(),
        })
    }
}

impl NicDrops {
    /// From the text of `/proc/net/dev`: `name: values` a line, where the name may be glued
    /// to the first value (`eth0:123`) and only `lo` is left out.
    pub fn parse_dev(text: &str) -> Result<Self, ProcNetError> {
        let mut columns: Option<DevColumns> = None;
        let mut drops = Self::default();
        for line in text.lines() {
            // No interface's name holds a colon, and no header line does.
            let Some((iface, rest)) = line.split_once(':') else {
                columns = DevColumns::of(line).or(columns);
                continue;
            };
            let cols = columns.ok_or(ProcNetError::DevHeader)?;
            let iface = iface.trim();
            let values: Vec<&str> = rest.split_whitespace().collect();
            if values.len() != cols.count {
                return Err(ProcNetError::DevUneven {
                    iface: iface.into(),
                    values: values.len(),
                    columns: cols.count,
                });
            }
            if iface == "lo" {
                continue;
            }
            let at = |i: usize| {
                values[i]
                    .parse::<u64>()
                    .map_err(|_| ProcNetError::DevValue {
                        iface: iface.into(),
                        value: values[i].into(),
                    })
            };
            drops.rx = drops.rx.saturating_add(at(cols.rx_drop)?);
            drops.tx = drops.tx.saturating_add(at(cols.tx_drop)?);
        }
        columns.map(|_| drops).ok_or(ProcNetError::DevHeader)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
        Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens OutSegs RetransSegs\n\
        Tcp: 1 200 120000 -1 5 21064695 336863\n\
        Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors\n\
        Udp: 15107472 526 44747 14218195 44740 3 4\n\
        UdpLite: InDatagrams NoPorts\nUdpLite: 0 0\n";

    /// This machine's, read as it was (kernel 6.18).
    const NETSTAT: &str = "\
        TcpExt: SyncookiesSent SyncookiesRecv SyncookiesFailed EmbryonicRsts PruneCalled \
        RcvPruned OfoPruned OutOfWindowIcmps LockDroppedIcmps ArpFilter TW TWRecycled \
        TWKilled PAWSActive PAWSEstab BeyondWindow TSEcrRejected PAWSOldAck PAWSTimewait \
        DelayedACKs DelayedACKLocked DelayedACKLost ListenOverflows ListenDrops TCPHPHits \
        TCPPureAcks TCPHPAcks TCPRenoRecovery TCPSackRecovery TCPSACKReneging TCPSACKReorder \
        TCPRenoReorder TCPTSReorder TCPFullUndo TCPPartialUndo TCPDSACKUndo TCPLossUndo \
        TCPLostRetransmit TCPRenoFailures TCPSackFailures TCPLossFailures TCPFastRetrans \
        TCPSlowStartRetrans TCPTimeouts TCPLossProbes TCPLossProbeRecovery \
        TCPRenoRecoveryFail TCPSackRecoveryFail TCPRcvCollapsed TCPBacklogCoalesce \
        TCPDSACKOldSent TCPDSACKOfoSent TCPDSACKRecv TCPDSACKOfoRecv TCPAbortOnData \
        TCPAbortOnClose TCPAbortOnMemory TCPAbortOnTimeout TCPAbortOnLinger TCPAbortFailed \
        TCPMemoryPressures TCPMemoryPressuresChrono TCPSACKDiscard TCPDSACKIgnoredOld \
        TCPDSACKIgnoredNoUndo TCPSpuriousRTOs TCPMD5NotFound TCPMD5Unexpected TCPMD5Failure \
        TCPSackShifted TCPSackMerged TCPSackShiftFallback TCPBacklogDrop PFMemallocDrop \
        TCPMinTTLDrop TCPDeferAcceptDrop IPReversePathFilter TCPTimeWaitOverflow \
        TCPReqQFullDoCookies TCPReqQFullDrop TCPRetransFail TCPRcvCoalesce TCPOFOQueue \
        TCPOFODrop TCPOFOMerge TCPChallengeACK TCPSYNChallenge TCPFastOpenActive \
        TCPFastOpenActiveFail TCPFastOpenPassive TCPFastOpenPassiveFail \
        TCPFastOpenListenOverflow TCPFastOpenCookieReqd TCPFastOpenBlackhole \
        TCPSpuriousRtxHostQueues BusyPollRxPackets TCPAutoCorking TCPFromZeroWindowAdv \
        TCPToZeroWindowAdv TCPWantZeroWindowAdv TCPSynRetrans TCPOrigDataSent \
        TCPHystartTrainDetect TCPHystartTrainCwnd TCPHystartDelayDetect TCPHystartDelayCwnd \
        TCPACKSkippedSynRecv TCPACKSkippedPAWS TCPACKSkippedSeq TCPACKSkippedFinWait2 \
        TCPACKSkippedTimeWait TCPACKSkippedChallenge TCPWinProbe TCPKeepAlive TCPMTUPFail \
        TCPMTUPSuccess TCPDelivered TCPDeliveredCE TCPAckCompressed TCPZeroWindowDrop \
        TCPRcvQDrop TCPWqueueTooBig TCPFastOpenPassiveAltKey TcpTimeoutRehash \
        TcpDuplicateDataRehash TCPDSACKRecvSegs TCPDSACKIgnoredDubious TCPMigrateReqSuccess \
        TCPMigrateReqFailure TCPPLBRehash TCPAORequired TCPAOBad TCPAOKeyNotFound TCPAOGood \
        TCPAODroppedIcmps\n\
        TcpExt: 0 0 0 0 5602 0 0 0 0 0 538893 48 0 0 0 0 0 8 0 696403 9 547072 3443 3443 \
        7785119 6809438 5228322 0 2289 0 2013 0 104 1323 100 2589 0 49 0 0 0 3492 0 3384 \
        545665 52 0 0 0 1965881 547097 0 545851 0 59486 1502 0 0 0 0 0 0 0 2 540668 0 0 0 0 \
        12 161 7173 0 0 0 0 0 0 0 0 0 8349967 4226 0 0 0 0 0 0 0 0 0 0 0 4 0 860 382992 \
        382992 1212126 3380 26563802 660 37548 0 0 0 0 55 0 0 0 216 0 0 0 27248190 0 0 0 0 0 \
        0 3384 0 546825 1 0 0 0 0 0 0 0 0\n\
        IpExt: InNoRoutes InTruncatedPkts InMcastPkts OutMcastPkts InBcastPkts OutBcastPkts \
        InOctets OutOctets InMcastOctets OutMcastOctets InBcastOctets OutBcastOctets \
        InCsumErrors InNoECTPkts InECT1Pkts InECT0Pkts InCEPkts ReasmOverlaps\n\
        IpExt: 0 0 0 0 0 0 592438429912 591820420630 0 0 0 0 0 40622664 0 115465039 0 0\n\
        MPTcpExt: MPCapableSYNRX MPCapableSYNTX MPCapableSYNACKRX MPCapableACKRX \
        MPCapableFallbackACK MPCapableFallbackSYNACK MPCapableSYNTXDrop \
        MPCapableSYNTXDisabled MPCapableEndpAttempt MPFallbackTokenInit MPTCPRetrans \
        MPJoinNoTokenFound MPJoinSynRx MPJoinSynBackupRx MPJoinSynAckRx MPJoinSynAckBackupRx \
        MPJoinSynAckHMacFailure MPJoinAckRx MPJoinAckHMacFailure MPJoinRejected MPJoinSynTx \
        MPJoinSynTxCreatSkErr MPJoinSynTxBindErr MPJoinSynTxConnectErr DSSNotMatching \
        DSSCorruptionFallback DSSCorruptionReset InfiniteMapTx InfiniteMapRx DSSNoMatchTCP \
        DataCsumErr OFOQueueTail OFOQueue OFOMerge NoDSSInWindow DuplicateData AddAddr \
        AddAddrTx AddAddrTxDrop EchoAdd EchoAddTx EchoAddTxDrop PortAdd AddAddrDrop \
        MPJoinPortSynRx MPJoinPortSynAckRx MPJoinPortAckRx MismatchPortSynRx \
        MismatchPortAckRx RmAddr RmAddrDrop RmAddrTx RmAddrTxDrop RmSubflow MPPrioTx \
        MPPrioRx MPFailTx MPFailRx MPFastcloseTx MPFastcloseRx MPRstTx MPRstRx SubflowStale \
        SubflowRecover SndWndShared RcvWndShared RcvWndConflictUpdate RcvWndConflict \
        MPCurrEstab Blackhole MPCapableDataFallback MD5SigFallback DssFallback \
        SimultConnectFallback FallbackFailed WinProbe\n\
        MPTcpExt: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 \
        0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

    /// This machine's, read as it was.
    const DEV: &str = r"Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 591922597044 61881205    0    0    0     0          0         0 591922597044 61881205    0    0    0     0       0          0
  ifb0:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
  ifb1:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
  eth0: 516800848   23423    0    0    0     0          0         0  1632184   18184    0    0    0     0       0          0
";

    /// The same header over a link's namespace whose veths dropped, one name glued to its
    /// first count as older kernels printed it (`%6s:%8lu`).
    const DEV_DROPPED: &str = r"Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    2660      38    0    9    0     0          0         0     2660      38    0    0    0     0       0          0
qb-1a2b-c:2104882137 1453361    0   17    0     0          0         0 46017452  696004    0    3    0     0       0          0
 qb-1a2b-c2: 1500   1    0    4    0     0          0         0        0       0    0    1    0     0       0          0
";

    #[test]
    fn the_snmp_counters_are_read_by_name() {
        let c = NetCounters::parse_snmp(SNMP).unwrap();
        assert_eq!(
            c,
            NetCounters {
                udp_in_datagrams: 15_107_472,
                udp_out_datagrams: 14_218_195,
                udp_rcvbuf_errors: 44_740,
                udp_sndbuf_errors: 3,
                udp_in_errors: 44_747,
                tcp_out_segs: 21_064_695,
                tcp_retrans_segs: 336_863,
                tcp_ext: None,
                nic_rx_dropped: None,
                nic_tx_dropped: None,
            }
        );
        assert_eq!(c.buffer_drops(), 44_743);
    }

    #[test]
    fn a_missing_counter_or_a_short_line_is_named() {
        let no_udp = SNMP.replace("Udp:", "Udq:");
        assert_eq!(
            NetCounters::parse_snmp(&no_udp),
            Err(ProcNetError::Missing {
                file: "snmp",
                counter: "Udp.InDatagrams"
            })
        );
        let short = SNMP.replace("44740 3 4", "44740 3");
        assert_eq!(
            NetCounters::parse_snmp(&short),
            Err(ProcNetError::Uneven {
                file: "snmp",
                group: "Udp".into(),
                names: 7,
                values: 6
            })
        );
    }

    #[test]
    fn tcps_losses_are_read_from_this_machines_netstat() {
        assert_eq!(
            TcpExtCounters::parse_netstat(NETSTAT).unwrap(),
            TcpExtCounters {
                tcp_lost_retransmit: 49,
                tcp_timeouts: 3_384,
                tcp_spurious_rtos: 0,
                tcp_backlog_drop: 0,
                tcp_rcvq_drop: 0,
                tcp_ofo_queue: 4_226,
                tcp_ofo_drop: 0,
                tcp_zero_window_drop: 0,
                tcp_listen_drops: 3_443,
            }
        );
    }

    /// Every counter from its own column: the values line of the sample's names holds each
    /// column's number, plus one so that none is 0.
    #[test]
    fn each_tcp_counter_is_read_from_its_own_column() {
        let names = NETSTAT.lines().next().unwrap();
        let n = names.split_whitespace().count() - 1;
        let values: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
        let text = format!("{names}\nTcpExt: {}\n", values.join(" "));
        let column = |name: &str| {
            names
                .split_whitespace()
                .skip(1)
                .position(|w| w == name)
                .unwrap() as u64
                + 1
        };
        let c = TcpExtCounters::parse_netstat(&text).unwrap();
        let read = [
            (c.tcp_lost_retransmit, "TCPLostRetransmit"),
            (c.tcp_timeouts, "TCPTimeouts"),
            (c.tcp_spurious_rtos, "TCPSpuriousRTOs"),
            (c.tcp_backlog_drop, "TCPBacklogDrop"),
            (c.tcp_rcvq_drop, "TCPRcvQDrop"),
            (c.tcp_ofo_queue, "TCPOFOQueue"),
            (c.tcp_ofo_drop, "TCPOFODrop"),
            (c.tcp_zero_window_drop, "TCPZeroWindowDrop"),
            (c.tcp_listen_drops, "ListenDrops"),
        ];
        for (value, name) in read {
            assert_eq!(value, column(name), "{name}");
        }
    }

    /// An older kernel's `TcpExt` lacks the newer names: they never counted there. Without
    /// the lines at all nothing is said.
    #[test]
    fn a_name_an_older_kernel_lacks_is_zero_and_no_tcpext_is_an_error() {
        let old = "TcpExt: ListenDrops TCPTimeouts TCPOFOQueue\nTcpExt: 1 2 3\n\
            IpExt: InNoRoutes\nIpExt: 0\n";
        let c = TcpExtCounters::parse_netstat(old).unwrap();
        assert_eq!(
            (c.tcp_listen_drops, c.tcp_timeouts, c.tcp_ofo_queue),
            (1, 2, 3)
        );
        assert_eq!((c.tcp_rcvq_drop, c.tcp_zero_window_drop), (0, 0));
        let no_tcp = NETSTAT.replace("TcpExt:", "TcpExx:");
        assert_eq!(
            TcpExtCounters::parse_netstat(&no_tcp),
            Err(ProcNetError::NoGroup {
                file: "netstat",
                group: "TcpExt"
            })
        );
        // Names without their values are no counters.
        let names_only = NETSTAT.lines().next().unwrap();
        assert!(TcpExtCounters::parse_netstat(names_only).is_err());
        let short: String = NETSTAT
            .lines()
            .enumerate()
            .map(|(i, l)| match i {
                1 => format!("{}\n", l.rsplit_once(' ').unwrap().0),
                _ => format!("{l}\n"),
            })
            .collect();
        assert!(matches!(
            TcpExtCounters::parse_netstat(&short),
            Err(ProcNetError::Uneven { file: "netstat", ref group, .. }) if group == "TcpExt"
        ));
    }

    #[test]
    fn the_interfaces_drops_leave_out_lo() {
        assert_eq!(NicDrops::parse_dev(DEV), Ok(NicDrops { rx: 0, tx: 0 }));
        assert_eq!(
            NicDrops::parse_dev(DEV_DROPPED),
            Ok(NicDrops { rx: 21, tx: 4 })
        );
        let only_lo: String = DEV.lines().take(3).map(|l| format!("{l}\n")).collect();
        assert_eq!(NicDrops::parse_dev(&only_lo), Ok(NicDrops::default()));
    }

    #[test]
    fn a_dev_text_that_does_not_fit_its_header_is_an_error() {
        let headless: String = DEV.lines().skip(2).map(|l| format!("{l}\n")).collect();
        assert_eq!(NicDrops::parse_dev(&headless), Err(ProcNetError::DevHeader));
        assert_eq!(NicDrops::parse_dev(""), Err(ProcNetError::DevHeader));
        let short = DEV.replace("18184    0    0    0     0       0          0", "18184");
        assert_eq!(
            NicDrops::parse_dev(&short),
            Err(ProcNetError::DevUneven {
                iface: "eth0".into(),
                values: 10,
                columns: 16
            })
        );
        let signed = DEV_DROPPED.replace("   17 ", "  -17 ");
        assert_eq!(
            NicDrops::parse_dev(&signed),
            Err(ProcNetError::DevValue {
                iface: "qb-1a2b-c".into(),
                value: "-17".into()
            })
        );
    }

    /// `snmp` alone is enough: the other two are said where they were read and made sense.
    #[test]
    fn the_other_files_are_absent_where_unread_or_senseless() {
        let all = NetCounters::from_files(SNMP, Some(NETSTAT), Some(DEV_DROPPED)).unwrap();
        assert_eq!(all.tcp_ext.unwrap().tcp_timeouts, 3_384);
        assert_eq!(
            (all.nic_rx_dropped, all.nic_tx_dropped),
            (Some(21), Some(4))
        );
        assert_eq!(all.udp_rcvbuf_errors, 44_740);
        for (netstat, dev) in [(None, None), (Some("TcpExx: A\nTcpExx: 1\n"), Some(SNMP))] {
            let c = NetCounters::from_files(SNMP, netstat, dev).unwrap();
            assert_eq!(c, NetCounters::parse_snmp(SNMP).unwrap());
        }
        assert!(NetCounters::from_files(NETSTAT, Some(NETSTAT), Some(DEV)).is_err());
    }

    fn dev_line(name: &str, rx_drop: u32, tx_drop: u32, glued: bool) -> String {
        let sep = if glued { ":" } else { ": " };
        format!("{name}{sep}100 2 0 {rx_drop} 0 0 0 0 200 3 0 {tx_drop} 0 0 0 0\n")
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_counters_or_an_error(text in "(\\PC{0,30}\n){0,8}", names in "[A-Za-z: \n0-9|-]{0,200}") {
            for t in [text.clone(), names.clone(), format!("{SNMP}{names}"), format!("{NETSTAT}{names}"), format!("{DEV}{names}")] {
                let _ = NetCounters::parse_snmp(&t);
                let _ = TcpExtCounters::parse_netstat(&t);
                let _ = NicDrops::parse_dev(&t);
                let _ = NetCounters::from_files(SNMP, Some(&t), Some(&t));
            }
        }

        /// Whatever the interfaces and however their names meet their numbers, the drops
        /// read are the sum of theirs other than `lo`'s.
        #[test]
        fn the_drop_columns_add_up_over_any_interfaces(
            ifaces in proptest::collection::vec(("(lo|[a-z][a-z0-9.-]{0,14})", proptest::num::u32::ANY, proptest::num::u32::ANY, proptest::bool::ANY), 0..8)
        ) {
            let mut text: String = DEV.lines().take(2).map(|l| format!("{l}\n")).collect();
            let (mut rx, mut tx) = (0u64, 0u64);
            for (name, r, t, glued) in &ifaces {
                text += &dev_line(name, *r, *t, *glued);
                if name != "lo" {
                    rx += u64::from(*r);
                    tx += u64::from(*t);
                }
            }
            proptest::prop_assert_eq!(NicDrops::parse_dev(&text), Ok(NicDrops { rx, tx }));
        }
    }
}
