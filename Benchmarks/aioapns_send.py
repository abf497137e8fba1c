"""Sends N notifications with aioapns (token auth) to an APNs look-alike and prints the rate.

usage: aioapns_send.py PORT CA_PEM KEY_P8 KEY_ID TEAM_ID TOPIC DEVICE N [CONNECTIONS]
"""
import asyncio
import logging
import ssl
import sys
import time
from collections import Counter

from aioapns import APNs, NotificationRequest, PushType
from aioapns.connection import APNsProductionClientProtocol

port, ca, key, key_id, team, topic, device, count = sys.argv[1:9]
connections = int(sys.argv[9]) if len(sys.argv) > 9 else 4
APNsProductionClientProtocol.APNS_SERVER = "localhost"
logging.getLogger("aioapns").setLevel(logging.ERROR)  # its "Pool is busy" warnings are noise here
APNsProductionClientProtocol.APNS_PORT = int(port)


async def main():
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["h2"])
    client = APNs(key=key, key_id=key_id, team_id=team, topic=topic, ssl_context=ctx, max_connections=connections)
    requests = [
        NotificationRequest(device_token=device, message={"aps": {"alert": "n%d" % i}}, push_type=PushType.ALERT)
        for i in range(int(count))
    ]
    start = time.monotonic()
    results = await asyncio.gather(*(client.send_notification(r) for r in requests))
    elapsed = time.monotonic() - start
    statuses = Counter(r.status for r in results)
    print("aioapns: %d notifications in %.2f s = %.0f/s, statuses %s" % (len(results), elapsed, len(results) / elapsed, dict(statuses)))
    client.pool.close()


asyncio.run(main())
