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
