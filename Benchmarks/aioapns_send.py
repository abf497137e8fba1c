#!/usr/bin/python3
"""aioapns (Debian python3-aioapns) sending COUNT notifications to an APNs look-alike on localhost:PORT,
for Benchmarks/run.sh. Prints one line: notifications/s, statuses, seconds.

usage: aioapns_send.py PORT CA_FILE KEY_FILE KEY_ID TEAM_ID TOPIC DEVICE COUNT CONNECTIONS
"""
import asyncio, collections, ssl, sys, time

from aioapns import APNs, NotificationRequest, PushType
from aioapns.connection import APNsProductionClientProtocol

port, ca, key, key_id, team, topic, device, count, connections = sys.argv[1:10]
APNsProductionClientProtocol.APNS_SERVER = "localhost"
APNsProductionClientProtocol.APNS_PORT = int(port)


async def main():
    context = ssl.create_default_context(cafile=ca)
    context.set_alpn_protocols(["h2"])
    client = APNs(key=key, key_id=key_id, team_id=team, topic=topic, ssl_context=context,
                  max_connections=int(connections))
    payload = {"aps": {"alert": "benchmark"}}
    await client.send_notification(NotificationRequest(device_token=device, message=payload, push_type=PushType.ALERT))
    start = time.monotonic()
    results = await asyncio.gather(*(
        client.send_notification(NotificationRequest(device_token=device, message=payload, push_type=PushType.ALERT))
        for _ in range(int(count))))
    elapsed = time.monotonic() - start
    statuses = collections.Counter(str(r.status) for r in results)
    print("aioapns: %s notifications, %s connections: %.0f notifications/s in %.2f s, statuses %s"
          % (count, connections, int(count) / elapsed, elapsed, dict(statuses)))
    client.pool.close()


asyncio.run(main())
