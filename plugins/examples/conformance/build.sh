#!/usr/bin/env bash
# Builds the conformance plugin into target/examples/conformance/:
# conformance.wasm (a wasm32-wasip2 component, contract v0.2.0) and its
# manifest conformance.toml.
#
# Pinned: the Rust toolchain by the repository's rust-toolchain.toml, wit-bindgen
# (0.63) and every other crate by Cargo.lock. Needs `rustup target add wasm32-wasip2`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out="$root/target/examples/conformance"
mkdir -p "$out"

# The same target dir and `plugin` profile as examples/rust/build.sh.
env -u RUSTFLAGS -u CARGO_ENCODED_RUSTFLAGS -u CARGO_BUILD_TARGET -u CARGO_TARGET_DIR \
  cargo build --quiet --locked --manifest-path "$root/Cargo.toml" \
  -p toolhost-example-conformance --profile plugin --target wasm32-wasip2 \
  --target-dir "$root/target/examples/cargo"

cp "$root/target/examples/cargo/wasm32-wasip2/plugin/toolhost_example_conformance.wasm" "$out/conformance.wasm"
cp "$here/conformance.toml" "$out/conformance.toml"
echo "built $out/conformance.wasm ($(stat -c %s "$out/conformance.wasm") bytes)"
