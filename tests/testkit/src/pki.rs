//! A test PKI: a certificate authority made for one test or run, and the serving and client
//! certificates it signs (rcgen), as PEM text.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// The names of a server on loopback.
pub const LOOPBACK: &[&str] = &["localhost", "127.0.0.1"];

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

/// What a leaf certificate is for, and who it names.
struct LeafSpec<'a> {
    common_name: &'a str,
    organization: Option<&'a str>,
    names: &'a [&'a str],
    usage: ExtendedKeyUsagePurpose,
    /// Valid from, to (Unix times); rcgen's default period otherwise.
    validity: Option<(i64, i64)>,
}

impl Leaf {
    /// The certificate, DER: what a TLS peer presents.
    pub fn der(&self) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(self.cert_pem.as_bytes()).expect("leaf PEM")
    }
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

    fn leaf(&self, spec: LeafSpec<'_>) -> Leaf {
        let names: Vec<String> = spec.names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("certificate parameters");
        if let Some((not_before, not_after)) = spec.validity {
            let at = |unix| {
                x509_parser::time::ASN1Time::from_timestamp(unix)
                    .expect("a representable time")
                    .to_datetime()
            };
            params.not_before = at(not_before);
            params.not_after = at(not_after);
        }
        params
            .distinguished_name
            .push(DnType::CommonName, spec.common_name);
        if let Some(organization) = spec.organization {
            // Kubernetes reads a client certificate's O as the user's groups.
            params
                .distinguished_name
                .push(DnType::OrganizationName, organization);
        }
        params.extended_key_usages.push(spec.usage);
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

    /// A serving certificate for `names` (DNS names or IP addresses; [`LOOPBACK`] for a
    /// server on this machine), as cert-manager would issue.
    pub fn server(&self, common_name: &str, names: &[&str]) -> Leaf {
        self.leaf(LeafSpec {
            common_name,
            organization: None,
            names,
            usage: ExtendedKeyUsagePurpose::ServerAuth,
            validity: None,
        })
    }

    /// A serving certificate for `names`, valid from `not_before` to `not_after` (Unix times).
    pub fn server_valid(
        &self,
        common_name: &str,
        names: &[&str],
        not_before: i64,
        not_after: i64,
    ) -> Leaf {
        self.leaf(LeafSpec {
            common_name,
            organization: None,
            names,
            usage: ExtendedKeyUsagePurpose::ServerAuth,
            validity: Some((not_before, not_after)),
        })
    }

    /// A client certificate for user `common_name`, in group `organization` if given.
    pub fn client(&self, common_name: &str, organization: Option<&str>) -> Leaf {
        self.leaf(LeafSpec {
            common_name,
            organization,
            names: &[],
            usage: ExtendedKeyUsagePurpose::ClientAuth,
            validity: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_are_pem_and_differ() {
        let ca = Ca::new("testkit CA");
        assert!(
            ca.pem.starts_with("-----BEGIN CERTIFICATE-----"),
            "{}",
            ca.pem
        );
        let a = ca.server("a", LOOPBACK);
        let b = ca.client("b", Some("system:masters"));
        assert!(a.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(a.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert_ne!(a.cert_pem, b.cert_pem);
        assert_ne!(a.key_pem, b.key_pem);
    }
}
