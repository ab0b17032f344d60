#!/usr/bin/env bash
# Builds the three example plugins into target/examples/{rust,python,js}/
# (NAME.wasm with its manifest NAME.toml beside it), where the test suite
# (tests/all/examples.rs) finds them. Each language's build.sh pins its tools:
#   rust/build.sh    rust-toolchain.toml + Cargo.lock (wit-bindgen 0.63)
#   python/build.sh  componentize-py 0.25.1 from PyPI, into .venv
#   js/build.sh      componentize-js 0.23.0 from npm (package-lock.json), Node as installed
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for lang in rust python js; do
  "$here/$lang/build.sh"
done
