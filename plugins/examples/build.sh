#!/usr/bin/env bash
# Builds the example plugins into target/examples/{rust,conformance,python,js}/
# (NAME.wasm with its manifest NAME.toml beside it), where the test suite
# (tests/all/examples.rs, tests/all/conformance.rs) finds them. Each build.sh
# sources lib.sh (what they share) and pins its tools:
#   rust/build.sh         rust-toolchain.toml + Cargo.lock (wit-bindgen 0.63)
#   conformance/build.sh  the same (contract v0.2.0, MCP conformance suite's plugin)
#   python/build.sh       componentize-py 0.25.1 from PyPI, into .venv
#   js/build.sh           componentize-js 0.23.0 from npm (package-lock.json), Node as installed
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for example in rust conformance python js; do
  "$here/$example/build.sh"
done
