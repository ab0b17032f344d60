"""An OTLP/HTTP trace receiver for tests/all/telemetry.rs, on loopback only.

Binds 127.0.0.1 on a free port, prints `listening PORT` on stdout, then for each
`POST /v1/traces` (Content-Type application/x-protobuf) decodes the body with the
OpenTelemetry protobuf definitions (the `opentelemetry-proto` package's
`ExportTraceServiceRequest`), answers 200 with an empty `ExportTraceServiceResponse`,
and prints one line per span: `span {json}` with its name, kind, ids (hex), parent
span id, status, attributes (as plain JSON values) and the resource's attributes.
Any other request is answered 404 and printed as `refused METHOD PATH`. Exits when
stdin closes (the test's end).
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

OUT = threading.Lock()


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/traces":
            self.refuse()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        lines = []
        for rs in request.resource_spans:
            resource = attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    lines.append(json.dumps({
                        "name": s.name,
                        "kind": Span.SpanKind.Name(s.kind),
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "parent_span_id": s.parent_span_id.hex(),
                        "trace_state": s.trace_state,
                        "status": Status.StatusCode.Name(s.status.code),
                        "status_message": s.status.message,
                        "attributes": attributes(s.attributes),
                        "events": len(s.events),
                        "scope": ss.scope.name,
                        "resource": resource,
                        "content_type": self.headers.get("Content-Type"),
                    }, sort_keys=True))
        # Printed before the answer: once the exporter has its answer, the
        # spans are on stdout.
        with OUT:
            for line in lines:
                print("span " + line, flush=True)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def do_GET(self):
        self.refuse()

    def refuse(self):
        with OUT:
            print(f"refused {self.command} {self.path}", flush=True)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(f"listening {server.server_address[1]}", flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
