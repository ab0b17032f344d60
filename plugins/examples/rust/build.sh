#!/usr/bin/env bash
# Builds the Rust example plugin into target/examples/rust/:
# example_rust.wasm (a wasm32-wasip2 component) and its manifest example_rust.toml.
#
# Pinned: the Rust toolchain by the repository's rust-toolchain.toml, wit-bindgen
# (0.63) and every other crate by Cargo.lock (../lib.sh's cargo_example).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
cargo_example rust toolhost-example-rust example_rust
