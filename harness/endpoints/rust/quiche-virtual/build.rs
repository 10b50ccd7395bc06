//! Exports the quiche version pinned in Cargo.lock as LL_QUICHE_VERSION.
fn main() {
    ll_endpoint_common::export_locked_version("quiche", "LL_QUICHE_VERSION");
}
