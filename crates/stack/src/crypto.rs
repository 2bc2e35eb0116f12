//! The rustls crypto provider both sides of every run use, for TLS over TCP and for QUIC's
//! packet protection alike: ring by default, aws-lc-rs with the `aws-lc-rs` build feature.
//! It sets what a byte costs each protocol (AES-GCM, and QUIC's header protection on top), so
//! every report names it.

/// The provider this binary was built with, as reports name it.
#[cfg(feature = "aws-lc-rs")]
pub const PROVIDER: &str = "aws-lc-rs";
#[cfg(not(feature = "aws-lc-rs"))]
pub const PROVIDER: &str = "ring";

/// A fresh instance of [`PROVIDER`].
pub fn provider() -> rustls::crypto::CryptoProvider {
    #[cfg(feature = "aws-lc-rs")]
    {
        rustls::crypto::aws_lc_rs::default_provider()
    }
    #[cfg(not(feature = "aws-lc-rs"))]
    {
        rustls::crypto::ring::default_provider()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both protocols need TLS 1.3's AES-GCM suites from whichever provider it is.
    #[test]
    fn the_provider_offers_tls13_aes_gcm() {
        let suites: Vec<String> = provider()
            .cipher_suites
            .iter()
            .map(|s| format!("{:?}", s.suite()))
            .collect();
        for want in ["TLS13_AES_128_GCM_SHA256", "TLS13_AES_256_GCM_SHA384"] {
            assert!(suites.iter().any(|s| s == want), "{PROVIDER}: {suites:?}");
        }
    }
}
