#!/usr/bin/env bash
# Builds the JavaScript example plugin into target/examples/js/:
# example_js.wasm (a component made by componentize-js) and its manifest.
#
# Pinned: @bytecodealliance/componentize-js 0.23.0 (and jco 1.35.0) by
# package.json and package-lock.json here, installed with `npm ci`; Node as the
# machine has it (20 here). The SDK module plugins/sdk/js/toolhost.js is copied
# beside app.js.
#
# `-d http -d fetch-event`: componentize-js's default build imports
# wasi:http (for fetch and the fetch event), which toolhost never links, so
# the plugin would be refused at load.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
example_out js
tools="$root/target/examples/js-tools"   # node_modules stay out of the source tree
mkdir -p "$tools"

# `npm ci` again only when the lockfile changed since the last install.
if ! cmp -s "$here/package-lock.json" "$tools/installed.lock"; then
  cp "$here/package.json" "$here/package-lock.json" "$tools/"
  (cd "$tools" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$here/package-lock.json" "$tools/installed.lock"
fi

src="$out/src"
rm -rf "$src" && mkdir -p "$src"
cp "$here/app.js" "$root/plugins/sdk/js/toolhost.js" "$src/"
"$tools/node_modules/.bin/componentize-js" --wit "$root/wit/v0.1.0" -n tool-plugin \
  -d http -d fetch-event -o "$out/example_js.wasm" "$src/app.js"
built example_js
