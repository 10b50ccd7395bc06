//! rustls configurations: TLS 1.3 only, ALPN hq-interop, key log to SSLKEYLOGFILE
//! (rustls' KeyLogFile reads that variable itself). The client does not verify
//! the server (the interop-runner convention: test certificates are self-signed).

use std::path::Path;
use std::sync::Arc;

use ll_endpoint_common::{hq, Failure};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

pub fn server(certs: &Path) -> Result<rustls::ServerConfig, Failure> {
    let pem_err = |what: &str, e: &dyn std::fmt::Display| {
        Failure::Fatal(format!("{what} in {}: {e}", certs.display()))
    };
    let chain = CertificateDer::pem_file_iter(certs.join("cert.pem"))
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| pem_err("cert.pem", &e))?;
    let key = PrivateKeyDer::from_pem_file(certs.join("priv.key"))
        .map_err(|e| pem_err("priv.key", &e))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(Failure::fatal)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(Failure::fatal)?;
    config.alpn_protocols = vec![hq::ALPN.to_vec()];
    config.key_log = Arc::new(rustls::KeyLogFile::new());
    Ok(config)
}

pub fn client() -> Result<rustls::ClientConfig, Failure> {
    let provider = provider();
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(Failure::fatal)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
        .with_no_client_auth();
    config.alpn_protocols = vec![hq::ALPN.to_vec()];
    config.key_log = Arc::new(rustls::KeyLogFile::new());
    Ok(config)
}

/// Accepts any certificate but still checks the handshake signatures, so the
/// TLS exchange is the real one. Public for the virtual-time harness
/// (../quinn-virtual), which builds its own configs around a seeded provider.
#[derive(Debug)]
pub struct AnyServer(pub Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
