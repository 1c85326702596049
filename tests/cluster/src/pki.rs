//! The test cluster's PKI: one CA that signs the apiserver's serving certificate and the client
//! certificates (the admin's, a test user's, the webhook's), and the service-account signing
//! key. Everything is made per run and never leaves the run's directory.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

/// A certificate authority.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate, PEM.
    pub pem: String,
}

/// A certificate and its private key, PEM.
#[derive(Clone, Debug)]
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
}

/// A key pair, PEM.
pub struct SigningKey {
    pub key_pem: String,
    pub public_pem: String,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    fn leaf(
        &self,
        common_name: &str,
        organization: Option<&str>,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) -> Leaf {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("certificate parameters");
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        if let Some(organization) = organization {
            // Kubernetes reads a client certificate's O as the user's groups.
            params
                .distinguished_name
                .push(DnType::OrganizationName, organization);
        }
        params.extended_key_usages.push(usage);
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().expect("leaf key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("leaf certificate");
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// A serving certificate for `names` (DNS names or IP addresses).
    pub fn server(&self, common_name: &str, names: &[&str]) -> Leaf {
        self.leaf(
            common_name,
            None,
            names,
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate for user `common_name` in group `organization`.
    pub fn client(&self, common_name: &str, organization: Option<&str>) -> Leaf {
        self.leaf(
            common_name,
            organization,
            &[],
            ExtendedKeyUsagePurpose::ClientAuth,
        )
    }
}

/// The key that signs (private) and verifies (public) service-account tokens.
pub fn signing_key() -> SigningKey {
    let key = KeyPair::generate().expect("service-account key");
    SigningKey {
        key_pem: key.serialize_pem(),
        public_pem: key.public_key_pem(),
    }
}
