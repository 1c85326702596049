//! The test cluster's PKI: one CA (the testkit's) that signs the apiserver's serving
//! certificate and the client certificates (the admin's, a test user's, the webhook's), and
//! the service-account signing key. Everything is made per run and never leaves the run's directory.

pub use probelint_testkit::pki::{Ca, Leaf};
use rcgen::KeyPair;

/// A key pair, PEM.
pub struct SigningKey {
    pub key_pem: String,
    pub public_pem: String,
}

/// The key that signs (private) and verifies (public) service-account tokens.
pub fn signing_key() -> SigningKey {
    let key = KeyPair::generate().expect("service-account key");
    SigningKey {
        key_pem: key.serialize_pem(),
        public_pem: key.public_key_pem(),
    }
}
