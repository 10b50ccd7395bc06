//! Exports the s2n-quic version pinned in Cargo.lock as LL_S2N_QUIC_VERSION.
fn main() {
    ll_endpoint_common::export_locked_version("s2n-quic", "LL_S2N_QUIC_VERSION");
}
