import Threading
import NIOCore

/// One connection as its pool holds it: the channel (to close it), and the way requests get from
/// callers' threads to the connection's event loop.
///
/// Writing to a channel from outside its event loop costs a hop (a locked enqueue and often a thread
/// wake-up) per write. Here the first request of a burst schedules one hop, and every request that
/// arrives before it runs rides along: one hop, one flush, one TLS record for the lot. The batch is
/// handed to the HTTP/2 handler directly rather than written through the pipeline, which would box
/// each request and want a promise for each.
final class APNsConnection: Sendable {
    let channel: any Channel
    /// With token authentication, the key this connection signs with for its whole life: APNs binds a
    /// connection to the key of its first token (UnrelatedKeyIdInToken), so a key reloaded since it
    /// opened reaches only connections opened after.
    let tokens: APNsTokenAuthenticator?
    private let handler: NIOLoopBound<APNsHTTP2Handler>
    private let pending = Locked<[APNsHTTP2Request]>([])

    /// On `channel`'s event loop (the channel initializer).
    init(channel: any Channel, handler: APNsHTTP2Handler, tokens: APNsTokenAuthenticator?) {
        self.channel = channel
        self.tokens = tokens
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
    }

    func send(_ request: APNsHTTP2Request) {
        let first = pending.withLock { pending -> Bool in
            pending.append(request)
            return pending.count == 1
        }
        if first { scheduleHop() }
    }

    /// Several requests at once (a caller's batch): one lock, and at most one hop for them all.
    func send(contentsOf requests: [APNsHTTP2Request]) {
        guard !requests.isEmpty else { return }
        let first = pending.withLock { pending -> Bool in
            let wasEmpty = pending.isEmpty
            pending.append(contentsOf: requests)
            return wasEmpty
        }
        if first { scheduleHop() }
    }

    private func scheduleHop() {
        channel.eventLoop.execute { [self] in
            var batch: [APNsHTTP2Request] = []
            pending.withLock { swap(&$0, &batch) }
            handler.value.enqueue(batch)
        }
    }
}

/// Items gathered per destination (the worker's clients, a pool's connections), in first-seen
/// order. There are a handful of destinations at most, so a linear search by identity beats hashing.
/// A loop over indices rather than `firstIndex(where:)`, which the worker's module called
/// unspecialized, with a heap allocation for every item appended.
package struct BatchesByDestination<Destination: AnyObject, Item> {
    package private(set) var batches: [(destination: Destination, items: [Item])] = []
    /// Room each new batch reserves: the whole input may go to one destination.
    private let reserving: Int

    package init(reserving: Int) {
        self.reserving = reserving
    }

    package mutating func append(_ item: Item, to destination: Destination) {
        for index in batches.indices where batches[index].destination === destination {
            batches[index].items.append(item)
            return
        }
        var items: [Item] = []
        items.reserveCapacity(reserving)
        items.append(item)
        batches.append((destination, items))
    }
}
