import NIOConcurrencyHelpers
import NIOCore

/// The operations endpoint's open connections, so that shutdown closes them too: closing the
/// listening socket alone leaves keep-alive connections (a Prometheus scraper's) served after the
/// service has returned.
///
/// It also caps them: a connection accepted over `limit` is closed at once, so that a client that
/// opens connections and never closes them cannot exhaust the worker's descriptors.
final class ConnectionTracker: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var isShutDown = false
        let limit: Int

        enum AddAction {
            case keep
            /// Accepted while shutting down, or over the limit.
            case close
        }

        mutating func add(_ channel: any Channel) -> AddAction {
            guard !isShutDown, channels.count < limit else { return .close }
            channels[ObjectIdentifier(channel)] = channel
            return .keep
        }

        mutating func shutDown() -> [any Channel] {
            isShutDown = true
            defer { channels = [:] }
            return Array(channels.values)
        }
    }

    private let state: NIOLockedValueBox<State>

    init(limit: Int = .max) {
        state = NIOLockedValueBox(State(limit: limit))
    }

    /// Tracks `channel` until it closes.
    func add(_ channel: any Channel) {
        switch state.withLockedValue({ $0.add(channel) }) {
        case .keep:
            let id = ObjectIdentifier(channel)
            channel.closeFuture.whenComplete { [state] _ in
                state.withLockedValue { _ = $0.channels.removeValue(forKey: id) }
            }
        case .close:
            channel.close(promise: nil)
        }
    }

    /// Closes every tracked connection (a response being written is cut short: this runs only at
    /// shutdown, and scrapers retry).
    func closeAll() {
        for channel in state.withLockedValue({ $0.shutDown() }) {
            channel.close(promise: nil)
        }
    }
}
