# What the example plugins' build scripts share. Each sources it, after setting
# `here` to its own directory:  here=$(cd "$(dirname "$0")" && pwd); . "$here/../lib.sh"
# It sets `root` (the repository) and defines:
#   example_out DIR                 $out = target/examples/DIR, created
#   cargo_example DIR PACKAGE NAME  builds crate PACKAGE into $out/NAME.wasm (example_out DIR)
#   built NAME                      copies NAME.toml beside $out/NAME.wasm and says so

root=$(cd "$here/../../.." && pwd)

example_out() {
  out="$root/target/examples/$1"
  mkdir -p "$out"
}

# Pinned: the Rust toolchain by the repository's rust-toolchain.toml, wit-bindgen
# and every other crate by Cargo.lock. Needs `rustup target add wasm32-wasip2`.
cargo_example() {
  local dir=$1 package=$2 name=$3
  example_out "$dir"
  # Its own target dir, shared by the Rust examples, so it never waits on (or
  # invalidates) the host's build. The `plugin` profile (root Cargo.toml) is
  # opt-level "s", LTO, strip, panic=abort.
  env -u RUSTFLAGS -u CARGO_ENCODED_RUSTFLAGS -u CARGO_BUILD_TARGET -u CARGO_TARGET_DIR \
    cargo build --quiet --locked --manifest-path "$root/Cargo.toml" \
    -p "$package" --profile plugin --target wasm32-wasip2 \
    --target-dir "$root/target/examples/cargo"
  cp "$root/target/examples/cargo/wasm32-wasip2/plugin/${package//-/_}.wasm" "$out/$name.wasm"
  built "$name"
}

built() {
  cp "$here/$1.toml" "$out/$1.toml"
  echo "built $out/$1.wasm ($(stat -c %s "$out/$1.wasm") bytes)"
}
