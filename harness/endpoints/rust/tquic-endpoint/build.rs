//! Exports the tquic version pinned in Cargo.lock as LL_TQUIC_VERSION.
fn main() {
    ll_endpoint_common::export_locked_version("tquic", "LL_TQUIC_VERSION");
}
