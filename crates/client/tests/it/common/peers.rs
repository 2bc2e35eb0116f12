//! Third-party servers as test peers: finding them, their files, certificates and processes.

use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

#[allow(unused_imports)]
pub(crate) use qbench_testkit::which;

/// `len` bytes nobody would mistake for the server's payload pattern.
pub(crate) fn file_bytes(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

pub(crate) fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A leaf certificate for `localhost` and its key, written as `cert.pem` and `key.pem` in
/// `dir`.
pub(crate) fn localhost_cert(dir: &Path) -> (PathBuf, PathBuf) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

/// A peer process, killed when the test ends however it ends.
pub(crate) struct Peer(pub(crate) Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Peer {
    /// Waits (at most 20 s) until the peer accepts TCP connections on every one of `ports`;
    /// a peer that exits first fails the test with what it printed on stderr.
    pub(crate) fn listening(mut child: Child, name: &str, ports: &[u16]) -> Self {
        let deadline = Instant::now() + Duration::from_secs(20);
        while let Some(port) = ports
            .iter()
            .find(|p| TcpStream::connect(("127.0.0.1", **p)).is_err())
        {
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                panic!("{name} exited with {status}: {err}");
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{name} did not start listening on port {port}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Self(child)
    }
}
