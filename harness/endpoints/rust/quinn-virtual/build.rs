//! Exports the quinn and quinn-proto versions pinned in Cargo.lock.
fn main() {
    ll_endpoint_common::export_locked_version("quinn", "LL_QUINN_VERSION");
    ll_endpoint_common::export_locked_version("quinn-proto", "LL_QUINN_PROTO_VERSION");
}
