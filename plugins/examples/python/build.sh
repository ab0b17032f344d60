#!/usr/bin/env bash
# Builds the Python example plugin into target/examples/python/:
# example_python.wasm (a component made by componentize-py) and its manifest.
#
# Pinned: componentize-py 0.25.1 from PyPI, installed into the repository's
# .venv (created if missing; override with VENV=DIR). The SDK module
# plugins/sdk/python/toolhost_sdk.py is put on the Python path.
set -euo pipefail
COMPONENTIZE_PY=0.25.1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
example_out python
venv="${VENV:-$root/.venv}"

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if [ "$("$venv/bin/componentize-py" --version 2>/dev/null)" != "componentize-py $COMPONENTIZE_PY" ]; then
  "$venv/bin/pip" install -q "componentize-py==$COMPONENTIZE_PY"
fi

# Build from a copy under target/: componentize-py writes __pycache__ beside
# the sources. Only the app and the SDK are on the path: no site-packages are
# bundled (VIRTUAL_ENV would add the venv's).
src="$out/src"
rm -rf "$src" && mkdir -p "$src"
cp "$here/app.py" "$root/plugins/sdk/python/toolhost_sdk.py" "$src/"
cd "$src"
env -u VIRTUAL_ENV "$venv/bin/componentize-py" -d "$root/wit/v0.1.0" -w tool-plugin \
  componentize app -p "$src" -o "$out/example_python.wasm"
built example_python
