#!/usr/bin/env python3
"""A scripted APNs look-alike on hyper-h2 (an HTTP/2 stack independent of nghttp2 and SwiftNIO),
for the client's fault tests: a peer that shares no code with the client or the simulator.

Binds 127.0.0.1:0 with TLS (ALPN h2) and prints "LISTENING <port>" once ready. Answers
POST /3/device/<token> as APNs would, with behaviour chosen by flags:

  --answers JSON           {"<token>": [status, "Reason"], ...}; other tokens get 200
  --rate-503 F --rate-429 F  random ServiceUnavailable / TooManyRequests (seeded)
  --initial-streams N      SETTINGS_MAX_CONCURRENT_STREAMS at connect (APNs: 1 with token auth)
  --streams-after-success N  raised to N after the first 200 on the connection
  --drop-streams-after K   lowered to 1 after K requests on a connection
  --goaway-after K         after K requests: GOAWAY(last-stream-id = K-th stream, {"reason":"Shutdown"}),
                           answer only streams up to it, then close
  --close-after K          drop the TCP connection (no GOAWAY) when the K-th request arrives
  --delay-ms MS            answer each request after MS milliseconds
  --no-ping-ack            never answer PING (h2 would; we swallow it)

GET /stats answers JSON: requests, answered, max_open (largest number of concurrently open
streams seen on any connection), over_limit (requests that arrived above the advertised limit).
"""
import argparse, asyncio, json, random, ssl, sys, time, uuid

import h2.config, h2.connection, h2.events, h2.settings, h2.errors, h2.exceptions

STATS = {"requests": 0, "answered": 0, "max_open": 0, "over_limit": 0, "connections": 0}


class Connection(asyncio.Protocol):
    def __init__(self, args, rng):
        self.args, self.rng = args, rng
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8", validate_inbound_headers=False)
        self.h2 = h2.connection.H2Connection(config=config)
        self.requests = 0
        self.open = {}  # stream id -> (headers, body)
        self.limit = args.initial_streams
        self.succeeded = False
        self.goaway_last = None
        self.acked_limit = float("inf")  # what the client has acknowledged, in frame order

    def connection_made(self, transport):
        STATS["connections"] += 1
        self.transport = transport
        if self.args.no_ping_ack:
            # hyper-h2 acknowledges PING inside the state machine; drop ACK frames on the way out.
            original = self.h2.data_to_send
            def filtered(amount=None):
                data = original(amount) if amount is not None else original()
                return strip_ping_acks(data)
            self.h2.data_to_send = filtered
        self.h2.initiate_connection()
        self.h2.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.limit})
        self.flush()

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.transport.write(data)

    def data_received(self, data):
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.flush()
            self.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self.open[event.stream_id] = (dict(event.headers), bytearray())
                STATS["max_open"] = max(STATS["max_open"], len(self.open))
                # Against the limit the client had acknowledged when it opened this stream.
                if len(self.open) > self.acked_limit:
                    STATS["over_limit"] += 1
            elif isinstance(event, h2.events.DataReceived):
                if event.stream_id in self.open:
                    self.open[event.stream_id][1].extend(event.data)
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self.request_complete(event.stream_id)
            elif isinstance(event, h2.events.SettingsAcknowledged):
                changed = event.changed_settings.get(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS)
                if changed is not None:
                    self.acked_limit = changed.new_value
            elif isinstance(event, h2.events.StreamReset):
                self.open.pop(event.stream_id, None)
        self.flush()

    def request_complete(self, stream_id):
        headers, body = self.open[stream_id]
        if headers.get(":path") == "/stats":
            self.respond(stream_id, 200, json.dumps(STATS).encode(), {})
            return
        if self.goaway_last is not None and stream_id > self.goaway_last:
            return  # never processed; the client learns it from GOAWAY
        self.requests += 1
        STATS["requests"] += 1
        args = self.args
        if args.close_after and self.requests >= args.close_after:
            self.transport.abort()
            return
        if args.goaway_after and self.requests == args.goaway_after:
            # Written by hand: h2's close_connection() would stop us answering the streams below it.
            self.goaway_last = stream_id
            self.flush()
            debug = json.dumps({"reason": "Shutdown"}).encode()
            payload = stream_id.to_bytes(4, "big") + (0).to_bytes(4, "big") + debug
            self.transport.write(len(payload).to_bytes(3, "big") + b"\x07\x00" + (0).to_bytes(4, "big") + payload)
        if args.drop_streams_after and self.requests == args.drop_streams_after:
            self.set_limit(1)
        loop = asyncio.get_running_loop()
        if args.delay_ms:
            loop.call_later(args.delay_ms / 1000, self.answer, stream_id, headers)
        else:
            self.answer(stream_id, headers)

    def answer(self, stream_id, headers):
        if self.transport.is_closing() or stream_id not in self.open:
            return
        token = headers.get(":path", "").rsplit("/", 1)[-1]
        status, reason = self.args.answers.get(token, (200, None))
        if status == 200:
            draw = self.rng.random()
            if draw < self.args.rate_503:
                status, reason = 503, "ServiceUnavailable"
            elif draw < self.args.rate_503 + self.args.rate_429:
                status, reason = 429, "TooManyRequests"
        extra = {"apns-id": headers.get("apns-id") or str(uuid.uuid4()), "apns-unique-id": str(uuid.uuid4())}
        body = b""
        if reason:
            payload = {"reason": reason}
            if status == 410:
                payload["timestamp"] = int(time.time() * 1000)
            body = json.dumps(payload).encode()
        self.respond(stream_id, status, body, extra)
        if status == 200 and not self.succeeded:
            self.succeeded = True
            if self.args.streams_after_success:
                self.set_limit(self.args.streams_after_success)
        if self.goaway_last is not None and not any(s <= self.goaway_last for s in self.open):
            self.transport.close()

    def respond(self, stream_id, status, body, extra):
        self.open.pop(stream_id, None)
        response = [(":status", str(status))] + list(extra.items())
        try:
            self.h2.send_headers(stream_id, response, end_stream=not body)
            if body:
                self.h2.send_data(stream_id, body, end_stream=True)
        except h2.exceptions.StreamClosedError:
            return
        STATS["answered"] += 1
        self.flush()

    def set_limit(self, value):
        self.limit = value
        self.h2.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: value})
        self.flush()

    def connection_lost(self, exc):
        self.open.clear()


def strip_ping_acks(data):
    out, i = bytearray(), 0
    while i + 9 <= len(data):
        length = int.from_bytes(data[i:i + 3], "big")
        frame = data[i:i + 9 + length]
        if not (data[i + 3] == 0x6 and data[i + 4] & 0x1):
            out += frame
        i += 9 + length
    return bytes(out + data[i:])


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--answers", type=json.loads, default={})
    parser.add_argument("--rate-503", type=float, default=0.0)
    parser.add_argument("--rate-429", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--initial-streams", type=int, default=1000)
    parser.add_argument("--streams-after-success", type=int, default=0)
    parser.add_argument("--drop-streams-after", type=int, default=0)
    parser.add_argument("--goaway-after", type=int, default=0)
    parser.add_argument("--close-after", type=int, default=0)
    parser.add_argument("--delay-ms", type=int, default=0)
    parser.add_argument("--no-ping-ack", action="store_true")
    args = parser.parse_args()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.cert, args.key)
    context.set_alpn_protocols(["h2"])
    rng = random.Random(args.seed)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Connection(args, rng), "127.0.0.1", 0, ssl=context)
    print("LISTENING", server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
