#!/usr/bin/env bash
# Installs and builds what the test suite drives besides Rust, all pinned, all
# inside the repository (run from anywhere; README's test command runs it):
#   .venv/                      the official MCP Python SDK and pytest (tests/python);
#                               the Prometheus Python client, whose parser reads
#                               /metrics (tests/all/mcp_http_metrics.rs)
#   tests/clients/node_modules/ Node 22 (the `node` npm package), the official MCP
#                               conformance suite and the MCP Inspector CLI
#                               (tests/all/conformance.rs), from package-lock.json
#   tests/registry/node_modules/ sigstore-js, the signer of the registry tests
#                               (host/registry/tests, tests/all/plugin_oci.rs);
#                               oras-py, requests, bcrypt and pyca/cryptography
#                               (push, htpasswd, keys) go into .venv
#   .venv/ also                 kubernetes-validate (the Kubernetes schemas the
#                               manifests in deploy/kubernetes are checked against,
#                               tests/deploy/manifests.py) and opentelemetry-proto
#                               (the OTLP receiver's decoding, tests/otlp_receiver.py,
#                               tests/all/telemetry.rs)
#   target/examples/            the example plugins in Rust, Python and JavaScript
#                               and the conformance plugin (plugins/examples/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
python3 -m venv .venv
.venv/bin/pip install -q mcp pytest
.venv/bin/pip install -q prometheus-client==0.26.0
.venv/bin/pip install -q oras==0.2.43 requests==2.34.2 bcrypt==5.0.0 cryptography==50.0.2
.venv/bin/pip install -q kubernetes-validate==1.37.0
.venv/bin/pip install -q opentelemetry-proto==1.45.2 protobuf==7.36.2
# `npm install` with the committed lock (npm 11's `npm ci` refuses this lock over
# an optional dependency of another platform); --loglevel=error hides the
# engine warnings of the system Node, which these packages never run on.
npm install --prefix tests/clients --no-audit --no-fund --loglevel=error
npm install --prefix tests/registry --no-audit --no-fund --loglevel=error
plugins/examples/build.sh
