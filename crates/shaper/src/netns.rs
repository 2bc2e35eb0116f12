//! Moving the calling thread into a named network namespace; threads it spawns afterwards
//! inherit it, which is how an in-process server or client ends up inside the topology.

use std::fs::File;
use std::os::fd::AsRawFd;

#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("opening /run/netns/{name}: {source}")]
    Open {
        name: String,
        source: std::io::Error,
    },
    #[error("entering network namespace {name}: {source}")]
    Enter {
        name: String,
        source: std::io::Error,
    },
    #[error("reading /proc/net/{file} in network namespace {name}: {source}")]
    Read {
        name: String,
        file: String,
        source: std::io::Error,
    },
}

pub fn enter(name: &str) -> Result<(), NetnsError> {
    let f = File::open(format!("/run/netns/{name}")).map_err(|source| NetnsError::Open {
        name: name.into(),
        source,
    })?;
    // SAFETY: setns on a valid namespace fd affects only the calling thread.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(NetnsError::Enter {
            name: name.into(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// `/proc/net/FILE` as namespace `name` sees it, read by a thread of its own that enters it:
/// the caller's namespace is left alone.
pub fn read_net_file(name: &str, file: &str) -> Result<String, NetnsError> {
    std::thread::scope(|s| {
        s.spawn(|| {
            enter(name)?;
            std::fs::read_to_string(format!("/proc/thread-self/net/{file}")).map_err(|source| {
                NetnsError::Read {
                    name: name.into(),
                    file: file.into(),
                    source,
                }
            })
        })
        .join()
        .unwrap_or_else(|_| {
            Err(NetnsError::Read {
                name: name.into(),
                file: file.into(),
                source: std::io::Error::other("the reading thread panicked"),
            })
        })
    })
}

/// Names of the network namespaces that exist now.
pub fn list() -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The calling thread's current network namespace, to come back to with `restore`.
pub fn current() -> Result<File, NetnsError> {
    File::open("/proc/thread-self/ns/net").map_err(|source| NetnsError::Open {
        name: "(current)".into(),
        source,
    })
}

pub fn restore(ns: &File) -> Result<(), NetnsError> {
    // SAFETY: setns on a valid namespace fd affects only the calling thread.
    let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(NetnsError::Enter {
            name: "(saved)".into(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use qbench_core::report::net_counters::NetCounters;

    use super::*;

    struct Throwaway(String);

    impl Drop for Throwaway {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }

    fn counters(ns: &str) -> NetCounters {
        NetCounters::parse_snmp(&read_net_file(ns, "snmp").unwrap()).unwrap()
    }

    /// A namespace's counters are its own: datagrams a small receive buffer drops there count
    /// there, the reading thread's caller stays where it was.
    #[test]
    fn a_namespaces_counters_count_its_own_socket_drops() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            assert!(std::env::var_os("CI").is_none(), "needs root, which CI has");
            eprintln!("skipped: needs root");
            return;
        }
        let ns = format!("qbnetns-test-{}", std::process::id());
        let ok = Command::new("ip").args(["netns", "add", &ns]).status();
        assert!(ok.is_ok_and(|s| s.success()), "ip netns add {ns}");
        let _guard = Throwaway(ns.clone());
        let here = std::fs::read_link("/proc/thread-self/ns/net").unwrap();
        let before = counters(&ns);
        assert_eq!(
            before,
            NetCounters::default(),
            "a new namespace counts nothing"
        );
        std::thread::scope(|s| {
            s.spawn(|| {
                enter(&ns).unwrap();
                let up = Command::new("ip")
                    .args(["link", "set", "lo", "up"])
                    .status();
                assert!(up.is_ok_and(|s| s.success()));
                let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                let one: libc::c_int = 1;
                // SAFETY: SO_RCVBUF reads a c_int that outlives the call, on our own socket.
                let rc = unsafe {
                    libc::setsockopt(
                        rx.as_raw_fd(),
                        libc::SOL_SOCKET,
                        libc::SO_RCVBUF,
                        (&one as *const libc::c_int).cast(),
                        size_of::<libc::c_int>() as libc::socklen_t,
                    )
                };
                assert_eq!(rc, 0);
                let to = rx.local_addr().unwrap();
                let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                for _ in 0..64 {
                    tx.send_to(&[0u8; 1200], to).unwrap();
                }
            })
            .join()
            .unwrap();
        });
        let after = counters(&ns).since(&before);
        assert_eq!(after.udp_out_datagrams, 64);
        assert!(after.udp_rcvbuf_errors > 0, "{after:?}");
        // The one datagram the buffer held was never read: `InDatagrams` counts reads.
        assert!(after.udp_rcvbuf_errors < 64, "{after:?}");
        assert_eq!(after.udp_in_datagrams, 0, "{after:?}");
        assert!(after.udp_in_errors >= after.udp_rcvbuf_errors, "{after:?}");
        assert_eq!(
            std::fs::read_link("/proc/thread-self/ns/net").unwrap(),
            here
        );
    }
}
