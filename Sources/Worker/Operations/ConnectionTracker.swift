import Threading
import NIOCore

/// The operations endpoint's open connections, so that shutdown closes them too (closing the
/// listening socket alone leaves keep-alive connections, a Prometheus scraper's, served after the
/// service has returned), and so that they stay few.
///
/// At `limit` a new connection takes the place of an old one rather than being turned away, so that
/// connections left open cannot lock the kubelet's probes out: the one that goes is the oldest that
/// has not completed a request yet (a client that connects and sends nothing, or trickles), else the
/// one idle longest between requests, else the one whose client has not read its answers for longest
/// (pipelined requests, answers left unread); a connection whose answer is being read is never
/// closed. Only when every one is being read is the new connection closed.
final class ConnectionTracker: Sendable {
    /// Where a connection is in its request/response cycle.
    enum Phase: Sendable {
        /// Accepted, no request completed yet.
        case new
        /// Kept alive between requests.
        case idle
        /// A request came in whole and is being answered.
        case answering
        /// Being answered, but the client does not read: NIO's write buffer for it is full.
        case stalled
    }

    private struct Entry {
        var channel: any Channel
        var phase: Phase
        /// When it entered its phase, in the tracker's own order (larger is later).
        var since: UInt64
    }

    private struct State {
        var entries: [ObjectIdentifier: Entry] = [:]
        var isShutDown = false
        var clock: UInt64 = 0
        let limit: Int

        enum AddAction {
            case keep
            /// Kept, in place of this one.
            case keepClosing(any Channel)
            /// Accepted while shutting down, or every connection's answer is being read.
            case close
        }

        mutating func add(_ channel: any Channel) -> AddAction {
            guard !isShutDown else { return .close }
            var action = AddAction.keep
            if entries.count >= limit {
                guard let (id, victim) = victim() else { return .close }
                entries[id] = nil
                action = .keepClosing(victim.channel)
            }
            clock += 1
            entries[ObjectIdentifier(channel)] = Entry(channel: channel, phase: .new, since: clock)
            return action
        }

        /// The oldest connection without a completed request, else the one idle longest, else the one
        /// stalled longest.
        private func victim() -> (ObjectIdentifier, Entry)? {
            for phase in [Phase.new, .idle, .stalled] {
                let candidates = entries.filter { $0.value.phase == phase }
                if let oldest = candidates.min(by: { $0.value.since < $1.value.since }) {
                    return (oldest.key, oldest.value)
                }
            }
            return nil
        }

        mutating func update(_ id: ObjectIdentifier, to phase: Phase) {
            guard entries[id] != nil else { return }
            clock += 1
            entries[id]!.phase = phase
            entries[id]!.since = clock
        }

        mutating func shutDown() -> [any Channel] {
            isShutDown = true
            defer { entries = [:] }
            return entries.values.map(\.channel)
        }
    }

    private let state: Locked<State>

    init(limit: Int = .max) {
        state = Locked(State(limit: limit))
    }

    /// Connections open now (tests wait for the server to have accepted theirs).
    var count: Int { state.withLock { $0.entries.count } }

    /// Tracks `channel` until it closes, closing another in its place at the limit.
    func add(_ channel: any Channel) {
        switch state.withLock({ $0.add(channel) }) {
        case .keep:
            removeWhenClosed(channel)
        case .keepClosing(let victim):
            removeWhenClosed(channel)
            victim.close(promise: nil)
        case .close:
            channel.close(promise: nil)
        }
    }

    /// A connection moved in its request/response cycle (`RequestDeadlineHandler` says when).
    func update(_ channel: any Channel, to phase: Phase) {
        state.withLock { $0.update(ObjectIdentifier(channel), to: phase) }
    }

    private func removeWhenClosed(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        channel.closeFuture.whenComplete { [state] _ in
            state.withLock { _ = $0.entries.removeValue(forKey: id) }
        }
    }

    /// Closes every tracked connection (a response being written is cut short: this runs only at
    /// shutdown, and scrapers retry).
    func closeAll() {
        for channel in state.withLock({ $0.shutDown() }) {
            channel.close(promise: nil)
        }
    }
}
