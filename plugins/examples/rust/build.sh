#!/usr/bin/env bash
# Builds the Rust example plugin into target/examples/rust/:
# example_rust.wasm (a wasm32-wasip2 component) and its manifest example_rust.toml.
#
# Pinned: the Rust toolchain by the repository's rust-toolchain.toml, wit-bindgen
# (0.63) and every other crate by Cargo.lock. Needs `rustup target add wasm32-wasip2`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out="$root/target/examples/rust"
mkdir -p "$out"

# Its own target dir, so it never waits on (or invalidates) the host's build.
# The `plugin` profile (root Cargo.toml) is opt-level "s", LTO, strip, panic=abort.
env -u RUSTFLAGS -u CARGO_ENCODED_RUSTFLAGS -u CARGO_BUILD_TARGET -u CARGO_TARGET_DIR \
  cargo build --quiet --locked --manifest-path "$root/Cargo.toml" \
  -p toolhost-example-rust --profile plugin --target wasm32-wasip2 \
  --target-dir "$root/target/examples/cargo"

cp "$root/target/examples/cargo/wasm32-wasip2/plugin/toolhost_example_rust.wasm" "$out/example_rust.wasm"
cp "$here/example_rust.toml" "$out/example_rust.toml"
echo "built $out/example_rust.wasm ($(stat -c %s "$out/example_rust.wasm") bytes)"
