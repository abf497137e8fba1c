#!/usr/bin/env python3
"""A small OTLP/HTTP trace receiver, for the tests: the spans a client posts to /v1/traces, decoded
with OpenTelemetry's own protobuf bindings (PyPI `opentelemetry-proto`, installed by scripts/peers.sh
into .build/peers/venv), one JSON object per span on standard output or in --out.

    otlp-receiver.py [--port 0] [--out FILE] [--discard]

It prints `listening <port>` first (port 0 picks a free one), then serves until killed. Bodies in
`application/x-protobuf` and `application/json`, gzip or not, are taken; anything else is answered
415, a body that does not decode 400 (and said on standard error), as a collector would.
--discard answers every post 200 unread (a sink for benchmarks: the exporter's cost, not ours).
"""
import argparse
import gzip
import http.server
import json
import sys
import threading

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2


def value(any_value):
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in any_value.kvlist_value.values}
    if kind == "bytes_value":
        return any_value.bytes_value.hex()
    return getattr(any_value, kind)


def attributes(pairs):
    return {kv.key: value(kv.value) for kv in pairs}


def spans(request):
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "resource": resource,
                    "scope": scope_spans.scope.name,
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "trace_state": span.trace_state,
                    "name": span.name,
                    "kind": span.kind,
                    "start_unix_nano": span.start_time_unix_nano,
                    "end_unix_nano": span.end_time_unix_nano,
                    "attributes": attributes(span.attributes),
                    "links": [
                        {
                            "trace_id": link.trace_id.hex(),
                            "span_id": link.span_id.hex(),
                            "attributes": attributes(link.attributes),
                        }
                        for link in span.links
                    ],
                    "status": {"code": span.status.code, "message": span.status.message},
                }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--out", default="-")
    parser.add_argument("--discard", action="store_true")
    args = parser.parse_args()
    out = sys.stdout if args.out == "-" else open(args.out, "a", buffering=1)
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *arguments):
            pass

        def answer(self, status, body=b"", content_type="application/x-protobuf"):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            if self.headers.get("Content-Length") is None:
                # A chunked body would be read as the next request: refused, as a plain server does.
                self.close_connection = True
                return self.answer(411, b"length required", "text/plain")
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path != "/v1/traces":
                return self.answer(404, b"not found", "text/plain")
            if args.discard:
                return self.answer(200)
            content_type = self.headers.get("Content-Type", "").split(";")[0].strip()
            request = trace_service_pb2.ExportTraceServiceRequest()
            try:
                if self.headers.get("Content-Encoding", "") == "gzip":
                    body = gzip.decompress(body)
                if content_type == "application/x-protobuf":
                    request.ParseFromString(body)
                elif content_type == "application/json":
                    json_format.Parse(body, request)
                else:
                    return self.answer(415, b"unsupported media type", "text/plain")
            except Exception as error:  # a collector answers 400 to what it cannot decode
                print(f"otlp-receiver: undecodable body: {error}", file=sys.stderr, flush=True)
                return self.answer(400, str(error).encode(), "text/plain")
            with lock:
                for span in spans(request):
                    out.write(json.dumps(span, sort_keys=True) + "\n")
                out.flush()
            response = trace_service_pb2.ExportTraceServiceResponse()
            if content_type == "application/json":
                return self.answer(200, json_format.MessageToJson(response).encode(), "application/json")
            return self.answer(200, response.SerializeToString())

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
