#!/usr/bin/env bash
# Builds the conformance plugin into target/examples/conformance/:
# conformance.wasm (a wasm32-wasip2 component, contract v0.2.0) and its
# manifest conformance.toml.
#
# Pinned: the Rust toolchain by the repository's rust-toolchain.toml, wit-bindgen
# (0.63) and every other crate by Cargo.lock (../lib.sh's cargo_example, as
# rust/build.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
cargo_example conformance toolhost-example-conformance conformance
