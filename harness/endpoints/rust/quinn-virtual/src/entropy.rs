//! Everything quinn-proto and rustls would draw from the OS, drawn instead from one
//! seeded stream per host, so a virtual run is a function of its inputs.
//!
//! Covered: the endpoint RNG (quinn-proto seeds each connection's RNG from it:
//! packet-number skips, grease transport parameter, path challenges), local
//! connection IDs, the client's original DCID, the stateless-reset HMAC key, the
//! address-validation token key and the token clock, rustls' `secure_random`
//! (client random, ticket nonces and IDs, age_add), the X25519 key share, and the
//! server's ECDSA P-256 CertificateVerify nonce. ring exposes no way to feed its
//! X25519 or ECDSA from a caller's bytes except its fixed-random test types, which
//! is why those are used below; they are deprecated in ring 0.17 and may go in 0.18.

#![allow(deprecated)]

use std::fmt;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use quinn_proto::{ConnectionId, ConnectionIdGenerator, TimeSource};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use ring::agreement;
use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use ring::test::rand::{FixedByteRandom, FixedSliceRandom};
use rustls::crypto::{
    ActiveKeyExchange, CryptoProvider, GetRandomFailed, KeyProvider, SecureRandom, SharedSecret,
    SupportedKxGroup,
};
use rustls::pki_types::PrivateKeyDer;
use rustls::sign::{Signer, SigningKey};
use rustls::{NamedGroup, SignatureAlgorithm, SignatureScheme};

/// A host's deterministic byte stream, shared by everything that host draws.
#[derive(Clone)]
pub struct Entropy(Arc<Mutex<ChaCha20Rng>>);

impl fmt::Debug for Entropy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Entropy")
    }
}

impl Entropy {
    /// The stream of `role` for run seed `seed`: the two hosts draw independently,
    /// so one host drawing more bytes does not shift the other's.
    pub fn new(seed: u64, role: &str) -> Entropy {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        for (k, b) in key[8..].iter_mut().zip(role.bytes()) {
            *k = b;
        }
        Entropy(Arc::new(Mutex::new(ChaCha20Rng::from_seed(key))))
    }

    pub fn fill(&self, out: &mut [u8]) {
        self.0.lock().unwrap().fill_bytes(out);
    }

    pub fn bytes<const N: usize>(&self) -> [u8; N] {
        let mut b = [0u8; N];
        self.fill(&mut b);
        b
    }

    /// The reset-token HMAC key quinn-proto's EndpointConfig::default would draw.
    pub fn hmac_key(&self) -> Arc<ring::hmac::Key> {
        Arc::new(ring::hmac::Key::new(
            ring::hmac::HMAC_SHA256,
            &self.bytes::<64>(),
        ))
    }

    /// The address-validation token key ServerConfig::with_crypto would draw.
    pub fn token_key(&self) -> Arc<ring::hkdf::Prk> {
        Arc::new(ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, &[]).extract(&self.bytes::<64>()))
    }

    /// rustls' ring provider with this stream as its randomness, key share and
    /// signing nonces. The provider wants `'static` parts; a run is one process,
    /// so leaking two small objects per host is the simple way to give them.
    pub fn provider(&self) -> Arc<CryptoProvider> {
        let base = rustls::crypto::ring::default_provider();
        let random: &'static SeededRandom = Box::leak(Box::new(SeededRandom(self.clone())));
        let x25519: &'static SeededX25519 = Box::leak(Box::new(SeededX25519(self.clone())));
        // The same groups in the same order as the real endpoint offers, so the
        // ClientHello is the same size; only X25519's share is ever generated.
        let kx_groups = base
            .kx_groups
            .iter()
            .map(|g| {
                if g.name() == NamedGroup::X25519 {
                    x25519 as &'static dyn SupportedKxGroup
                } else {
                    *g
                }
            })
            .collect();
        Arc::new(CryptoProvider {
            kx_groups,
            secure_random: random,
            key_provider: &DeterministicEcdsa,
            ..base
        })
    }
}

#[derive(Debug)]
struct SeededRandom(Entropy);

impl SecureRandom for SeededRandom {
    fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        self.0.fill(buf);
        Ok(())
    }
}

#[derive(Debug)]
struct SeededX25519(Entropy);

impl SupportedKxGroup for SeededX25519 {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, rustls::Error> {
        let seed = self.0.bytes::<32>();
        let rng = FixedSliceRandom { bytes: &seed };
        let private = agreement::EphemeralPrivateKey::generate(&agreement::X25519, &rng)
            .map_err(|_| rustls::Error::FailedToGetRandomBytes)?;
        let public = private
            .compute_public_key()
            .map_err(|_| rustls::Error::General("X25519 public key".into()))?;
        Ok(Box::new(X25519Share {
            private,
            public: public.as_ref().to_vec(),
        }))
    }

    fn name(&self) -> NamedGroup {
        NamedGroup::X25519
    }
}

struct X25519Share {
    private: agreement::EphemeralPrivateKey,
    public: Vec<u8>,
}

impl ActiveKeyExchange for X25519Share {
    fn complete(self: Box<Self>, peer: &[u8]) -> Result<SharedSecret, rustls::Error> {
        let peer = agreement::UnparsedPublicKey::new(&agreement::X25519, peer);
        agreement::agree_ephemeral(self.private, &peer, |secret| SharedSecret::from(secret))
            .map_err(|_| rustls::Error::PeerMisbehaved(rustls::PeerMisbehaved::InvalidKeyShare))
    }

    fn pub_key(&self) -> &[u8] {
        &self.public
    }

    fn group(&self) -> NamedGroup {
        NamedGroup::X25519
    }
}

/// Loads the server's ECDSA P-256 key (the kind harness/testbed/certs.py and the virtual
/// backend's certificate use) and signs with a nonce that depends only on the key
/// and the message: ring derives it from key, "random" bytes and message digest,
/// and the random bytes here are fixed.
#[derive(Debug)]
struct DeterministicEcdsa;

impl KeyProvider for DeterministicEcdsa {
    fn load_private_key(
        &self,
        der: PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn SigningKey>, rustls::Error> {
        let PrivateKeyDer::Pkcs8(pkcs8) = der else {
            return Err(rustls::Error::General(
                "virtual quinn: the server key must be PKCS#8 ECDSA P-256 (as harness/virtual/determinism.py writes it)".into(),
            ));
        };
        let pair = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_ASN1_SIGNING,
            pkcs8.secret_pkcs8_der(),
            &FixedByteRandom { byte: 0 },
        )
        .map_err(|e| {
            rustls::Error::General(format!(
                "virtual quinn: server key is not PKCS#8 ECDSA P-256: {e}"
            ))
        })?;
        Ok(Arc::new(EcdsaKey(Arc::new(pair))))
    }
}

#[derive(Debug)]
struct EcdsaKey(Arc<EcdsaKeyPair>);

impl SigningKey for EcdsaKey {
    fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn Signer>> {
        offered
            .contains(&SignatureScheme::ECDSA_NISTP256_SHA256)
            .then(|| Box::new(EcdsaSigner(self.0.clone())) as Box<dyn Signer>)
    }

    fn algorithm(&self) -> SignatureAlgorithm {
        SignatureAlgorithm::ECDSA
    }
}

#[derive(Debug)]
struct EcdsaSigner(Arc<EcdsaKeyPair>);

impl Signer for EcdsaSigner {
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, rustls::Error> {
        self.0
            .sign(&FixedByteRandom { byte: 0 }, message)
            .map(|s| s.as_ref().to_vec())
            .map_err(|_| rustls::Error::General("ECDSA signing failed".into()))
    }

    fn scheme(&self) -> SignatureScheme {
        SignatureScheme::ECDSA_NISTP256_SHA256
    }
}

/// Local connection IDs of 8 bytes (quinn's default length) from the stream.
pub struct SeededCids(pub Entropy);

impl ConnectionIdGenerator for SeededCids {
    fn generate_cid(&mut self) -> ConnectionId {
        ConnectionId::new(&self.0.bytes::<8>())
    }

    fn cid_len(&self) -> usize {
        8
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// The virtual clock as wall-clock time, for address-validation tokens.
#[derive(Debug)]
pub struct VirtualWallClock {
    pub epoch_unix_ns: u64,
    pub now_ns: Arc<AtomicU64>,
}

impl TimeSource for VirtualWallClock {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(self.epoch_unix_ns + self.now_ns.load(Ordering::Relaxed))
    }
}

impl rustls::time_provider::TimeProvider for VirtualWallClock {
    fn current_time(&self) -> Option<rustls::pki_types::UnixTime> {
        Some(rustls::pki_types::UnixTime::since_unix_epoch(
            Duration::from_nanos(self.epoch_unix_ns + self.now_ns.load(Ordering::Relaxed)),
        ))
    }
}

/// SSLKEYLOGFILE for one host (rustls' KeyLogFile reads one process-wide variable;
/// a virtual run has two hosts in one process).
pub struct KeyLogTo(Mutex<std::io::BufWriter<std::fs::File>>);

impl KeyLogTo {
    pub fn create(path: &Path) -> std::io::Result<KeyLogTo> {
        Ok(KeyLogTo(Mutex::new(std::io::BufWriter::new(
            std::fs::File::create(path)?,
        ))))
    }

    pub fn flush(&self) -> std::io::Result<()> {
        self.0.lock().unwrap().flush()
    }
}

impl fmt::Debug for KeyLogTo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyLogTo")
    }
}

impl rustls::KeyLog for KeyLogTo {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let _ = writeln!(
            self.0.lock().unwrap(),
            "{label} {} {}",
            hex(client_random),
            hex(secret)
        );
    }
}
