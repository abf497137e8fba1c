import NIOConcurrencyHelpers
import NIOCore

/// Requests on their way from callers' tasks to one connection's event loop.
///
/// Writing to a channel from outside its event loop costs a hop (a locked enqueue and often a thread
/// wake-up) per write. Here the first request of a burst schedules one hop, and every request that
/// arrives before it runs rides along: one hop, one flush, one TLS record for the lot.
final class APNsConnectionOutbox: Sendable {
    let channel: any Channel
    private let pending = NIOLockedValueBox<[APNsHTTP2Request]>([])

    init(channel: any Channel) {
        self.channel = channel
    }

    func send(_ request: APNsHTTP2Request) {
        let first = pending.withLockedValue { pending -> Bool in
            pending.append(request)
            return pending.count == 1
        }
        guard first else { return }
        channel.eventLoop.execute { [self] in
            let batch = pending.withLockedValue { pending -> [APNsHTTP2Request] in
                defer { pending.removeAll(keepingCapacity: true) }
                return pending
            }
            for request in batch {
                let written = channel.eventLoop.makePromise(of: Void.self)
                written.futureResult.whenFailure { _ in
                    // The pipeline is gone: the handler never saw the request.
                    request.promise.fail(
                        APNsClientError(.connectionLost, "connection closed before sending", mayHaveReachedAPNs: false))
                }
                channel.write(request, promise: written)
            }
            channel.flush()
        }
    }
}
