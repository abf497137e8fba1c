import Logging
import NIOCore
import NIOPosix
import NIOConcurrencyHelpers

/// The connections of one (environment, credential): opens them, hands each request to the least
/// loaded one, queues (bounded) when every stream is busy, replaces connections that end.
///
/// All decisions are `APNsPoolStateMachine`'s, taken under `state`'s lock; the I/O they call for
/// (connect, schedule, resume a waiter, close) happens after the lock is released.
final class APNsConnectionPool: Sendable {
    /// A request waiting for a stream: called once with the connection it got, or why it got none.
    typealias Waiter = @Sendable (Result<(Int, APNsConnectionOutbox), APNsClientError>) -> Void
    typealias Completion = @Sendable (Result<APNsResponse, APNsClientError>) -> Void

    struct Settings: Sendable {
        var host: String
        var port: Int
        var serverName: String
        var connections: Int
        var maximumWaiters: Int
        var connectTimeout: TimeAmount
        /// Tunnel through this HTTP proxy (CONNECT) instead of connecting to `host` directly.
        var proxy: APNsProxy?
        var backoff: APNsPoolStateMachine<Void>.Backoff
        var http2: APNsHTTP2Settings
    }

    private struct State: Sendable {
        var machine: APNsPoolStateMachine<Waiter>
        var channels: [Int: APNsConnectionOutbox] = [:]
        var reconnectTimers: [Int: Scheduled<Void>] = [:]
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
        var nextWaiterID = 0
    }

    private let settings: Settings
    private let group: any EventLoopGroup
    private let sslContext: OpenSSLContext
    private let logger: Logger
    /// A pthread mutex (NIOLockedValueBox) rather than Synchronization.Mutex: ThreadSanitizer sees
    /// through pthread locks, so its reports on this module stay meaningful.
    private let state: NIOLockedValueBox<State>

    init(settings: Settings, group: any EventLoopGroup, sslContext: OpenSSLContext, logger: Logger) {
        self.settings = settings
        self.group = group
        self.sslContext = sslContext
        self.logger = logger
        let backoff = APNsPoolStateMachine<Waiter>.Backoff(
            base: settings.backoff.base, maximum: settings.backoff.maximum, healthyAfter: settings.backoff.healthyAfter)
        self.state = NIOLockedValueBox(
            State(
                machine: APNsPoolStateMachine(
                    connections: settings.connections, maximumWaiters: settings.maximumWaiters, backoff: backoff)))
    }

    /// Sends one request on the least loaded connection; `completion` runs exactly once with its
    /// answer, on the connection's event loop (or on the caller's thread when nothing could be sent).
    /// `waiterID` names the request while it waits for a stream (see `giveUp`); `nil` picks one.
    func execute(
        _ content: APNsRequestContent, token: APNsProviderToken?, deadline: NIODeadline, waiterID: Int? = nil,
        resends: Int = 0, completion: @escaping Completion
    ) {
        acquire(deadline: deadline, waiterID: waiterID) { [self] acquired in
            switch acquired {
            case .success((let id, let outbox)):
                outbox.send(
                    request(
                        content, token: token, deadline: deadline, connectionID: id, resends: resends,
                        completion: completion))
            case .failure(let error):
                if error.wasNotProcessed, resends < Self.maximumResends {
                    execute(content, token: token, deadline: deadline, resends: resends + 1, completion: completion)
                } else {
                    completion(.failure(error))
                }
            }
        }
    }

    /// One request of a batch (`execute(_:deadline:)`).
    struct BatchItem: Sendable {
        var content: APNsRequestContent
        var token: APNsProviderToken?
        var completion: Completion
    }

    /// Sends several requests as `execute` does each, with one lock for all those that find a free
    /// stream and one hand-over per connection: a caller with many requests at hand (the worker's
    /// reader) costs each connection's event loop one wake-up and one write for the lot instead of
    /// one per request. Requests that find no free stream wait as `execute`'s do.
    func execute(_ batch: [BatchItem], deadline: NIODeadline) {
        guard batch.count > 1 else {
            if let item = batch.first {
                execute(item.content, token: item.token, deadline: deadline, completion: item.completion)
            }
            return
        }
        let taken = state.withLockedValue { state -> [(id: Int, outbox: APNsConnectionOutbox?)] in
            var taken: [(id: Int, outbox: APNsConnectionOutbox?)] = []
            taken.reserveCapacity(batch.count)
            while taken.count < batch.count, let id = state.machine.dispatchAtOnce() {
                taken.append((id, state.channels[id]))
            }
            return taken
        }
        var perConnection = BatchesByDestination<APNsConnectionOutbox, APNsHTTP2Request>(reserving: taken.count)
        for (index, (id, outbox)) in taken.enumerated() {
            let item = batch[index]
            guard let outbox else {
                update { $0.release(connectionID: id) }
                execute(item.content, token: item.token, deadline: deadline, resends: 1, completion: item.completion)
                continue
            }
            perConnection.append(
                request(
                    item.content, token: item.token, deadline: deadline, connectionID: id,
                    completion: item.completion),
                to: outbox)
        }
        for (outbox, requests) in perConnection.batches { outbox.send(contentsOf: requests) }
        for item in batch[taken.count...] {
            execute(item.content, token: item.token, deadline: deadline, completion: item.completion)
        }
    }

    /// How often a request the server did not process (`APNsClientError.wasNotProcessed`: refused
    /// by a GOAWAY, or given to a connection that was closing) goes again on another connection
    /// before its failure is handed back. A GOAWAY refuses every request queued on its connection at
    /// once (hundreds under load); handing each back as a failure made callers count an attempt
    /// APNs never saw, and two GOAWAYs in a row used up a retry budget. Bounded, so that a server
    /// that refuses everything cannot keep a request circling; the deadline bounds it too.
    static let maximumResends = 3

    /// A request on connection `id`; its answer gives the stream back before `completion` runs.
    private func request(
        _ content: APNsRequestContent, token: APNsProviderToken?, deadline: NIODeadline, connectionID id: Int,
        resends: Int = 0, completion: @escaping Completion
    ) -> APNsHTTP2Request {
        APNsHTTP2Request(
            content: content, token: token, deadline: deadline,
            completion: { [self] result in
                if case .success(let response) = result, response.status == 403,
                    response.reason == .unrelatedKeyIDInToken
                {
                    // APNs binds a connection to the key of its first token; a token from an
                    // unrelated key needs a connection of its own. Retire this one as after GOAWAY.
                    logger.info(
                        "retiring the connection: UnrelatedKeyIdInToken", metadata: ["connection": "\(id)"])
                    update { $0.goingAway(id: id, now: .now()) }
                }
                release(connectionID: id)
                if case .failure(let error) = result, error.wasNotProcessed, resends < Self.maximumResends,
                    NIODeadline.now() < deadline
                {
                    execute(content, token: token, deadline: deadline, resends: resends + 1, completion: completion)
                    return
                }
                completion(result)
            })
    }

    /// A stream was counted on a connection that is gone by the time the request reaches it.
    private static let vanished = APNsClientError(.connectionLost, "connection vanished", mayHaveReachedAPNs: false)

    var statistics: APNsPoolStatistics {
        state.withLockedValue { $0.machine.statistics }
    }

    /// A request's stream is free again: one lock and nothing else in the common case.
    private func release(connectionID id: Int) {
        if !state.withLockedValue({ $0.machine.releaseQuietly(connectionID: id) }) {
            update { $0.release(connectionID: id) }
        }
    }

    /// A fresh id for a request that may wait, for `execute(waiterID:)` and `giveUp`.
    func makeWaiterID() -> Int {
        state.withLockedValue { state in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
    }

    /// Stops taking requests, waits for every accepted one to finish, then closes the connections
    /// (each sends GOAWAY(NO_ERROR) first).
    func shutdown() async {
        let drained = state.withLockedValue { $0.machine.shutdown() }
        if !drained {
            await withCheckedContinuation { continuation in
                let now = state.withLockedValue { state -> Bool in
                    if state.machine.isDrained { return true }
                    state.drainWaiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        }
        let channels = state.withLockedValue { state -> [any Channel] in
            for timer in state.reconnectTimers.values { timer.cancel() }
            state.reconnectTimers = [:]
            return state.channels.values.map(\.channel)
        }
        for channel in channels {
            try? await channel.close()
        }
        for channel in channels {
            try? await channel.closeFuture.get()
        }
    }

    // MARK: Acquire

    private func acquire(deadline: NIODeadline, waiterID given: Int?, _ waiter: @escaping Waiter) {
        // The common case, one lock and no allocation: a connection has a free stream.
        let ready = state.withLockedValue { state -> (Int, APNsConnectionOutbox?)? in
            guard let id = state.machine.dispatchAtOnce() else { return nil }
            return (id, state.channels[id])
        }
        if let (id, outbox) = ready {
            guard let outbox else {
                update { $0.release(connectionID: id) }
                waiter(.failure(Self.vanished))
                return
            }
            waiter(.success((id, outbox)))
            return
        }
        let waiterID = given ?? makeWaiterID()
        let actions = update { $0.acquire(waiter, waiterID: waiterID) }
        let answered = actions.contains {
            switch $0 {
            case .dispatch, .fail: true
            default: false
            }
        }
        guard !answered else { return }
        // It waits: give up at the deadline (a no-op if it was served by then).
        group.any().scheduleTask(deadline: deadline) { [weak self] in
            self?.giveUp(
                waiterID,
                APNsClientError(.deadlineExceeded, "no stream free before the deadline", mayHaveReachedAPNs: false))
        }
    }

    /// Fails the request `waiterID` with `error` if it is still waiting for a stream.
    func giveUp(_ waiterID: Int, _ error: APNsClientError) {
        let waiter = state.withLockedValue { $0.machine.removeWaiter(id: waiterID) }
        waiter?(.failure(error))
    }

    // MARK: Actions

    /// Runs a state machine step under the lock, then performs its actions outside it.
    @discardableResult
    private func update(_ step: @Sendable (inout APNsPoolStateMachine<Waiter>) -> [APNsPoolStateMachine<Waiter>.Action])
        -> [APNsPoolStateMachine<Waiter>.Action]
    {
        let (actions, channels, drained) = state.withLockedValue { state in
            let actions = step(&state.machine)
            var drained: [CheckedContinuation<Void, Never>] = []
            if state.machine.isDrained, state.machine.shuttingDown {
                drained = state.drainWaiters
                state.drainWaiters = []
            }
            return (actions, state.channels, drained)
        }
        for action in actions {
            switch action {
            case .connect(let slot, let id):
                connect(slot: slot, id: id)
            case .reconnect(let slot, let delay):
                let timer = group.any().scheduleTask(in: delay) { [weak self] () -> Void in
                    self?.update { $0.reconnectDue(slot: slot) }
                }
                state.withLockedValue { $0.reconnectTimers[slot] = timer }
            case .dispatch(let waiter, let id):
                if let channel = channels[id] {
                    waiter(.success((id, channel)))
                } else {
                    // Counted on the connection by the dispatch: give the stream back.
                    update { $0.release(connectionID: id) }
                    waiter(.failure(Self.vanished))
                }
            case .fail(let waiter, let error):
                waiter(.failure(error))
            case .close(let id):
                channels[id]?.channel.close(promise: nil)
            }
        }
        for continuation in drained { continuation.resume() }
        return actions
    }

    // MARK: Connecting

    private func connect(slot: Int, id: Int) {
        let settings = self.settings
        let sslContext = self.sslContext
        let events = makeEvents(id: id)
        logger.debug(
            "connecting", metadata: ["host": "\(settings.host)", "port": "\(settings.port)", "connection": "\(id)"])
        // ClientBootstrap resolves the host name (getaddrinfo) on every connect: a fresh DNS answer each time.
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(settings.connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { [weak self] channel in
                channel.eventLoop.makeCompletedFuture {
                    if let proxy = settings.proxy {
                        try channel.pipeline.syncOperations.addHandler(
                            HTTPConnectHandler(
                                target: settings.host, port: settings.port, proxy: proxy,
                                timeout: settings.connectTimeout))
                    }
                    let tls = try OpenSSLConnection(context: sslContext, serverName: settings.serverName)
                    let http2 = APNsHTTP2Handler(
                        authority: settings.serverName, settings: settings.http2, events: events)
                    try channel.pipeline.syncOperations.addHandler(APNsTLSHandler(connection: tls))
                    try channel.pipeline.syncOperations.addHandler(http2)
                    let outbox = APNsConnectionOutbox(channel: channel, handler: http2)
                    self?.state.withLockedValue { $0.channels[id] = outbox }
                }
            }
        let address = settings.proxy.map { ($0.host, $0.port) } ?? (settings.host, settings.port)
        bootstrap.connect(host: address.0, port: address.1).whenComplete { [weak self] result in
            guard let self else { return }
            switch result {
            case .success:
                break  // the HTTP/2 handler reports readiness (or closes after its setup timeout)
            case .failure(let error):
                self.logger.info("connect failed", metadata: ["connection": "\(id)", "error": "\(error)"])
                let failure =
                    error as? APNsClientError
                    ?? APNsClientError(.connectFailed, "\(error)", mayHaveReachedAPNs: false)
                self.state.withLockedValue { _ = $0.channels.removeValue(forKey: id) }
                self.update { $0.connectionClosed(id: id, error: failure, now: .now()) }
            }
        }
    }

    private func makeEvents(id: Int) -> APNsConnectionEvents {
        APNsConnectionEvents(
            ready: { [weak self] capacity in
                self?.logger.debug("connection ready", metadata: ["connection": "\(id)", "streams": "\(capacity)"])
                self?.update { $0.connectionReady(id: id, capacity: capacity, now: .now()) }
            },
            capacityChanged: { [weak self] capacity in
                self?.update { $0.capacityChanged(id: id, capacity: capacity) }
            },
            goingAway: { [weak self] reason in
                self?.logger.info("GOAWAY", metadata: ["connection": "\(id)", "reason": "\(reason ?? "none")"])
                self?.update { $0.goingAway(id: id, now: .now()) }
            },
            closed: { [weak self] error in
                guard let self else { return }
                if let error {
                    self.logger.info("connection closed", metadata: ["connection": "\(id)", "error": "\(error)"])
                }
                self.state.withLockedValue { _ = $0.channels.removeValue(forKey: id) }
                self.update { $0.connectionClosed(id: id, error: error, now: .now()) }
            })
    }
}
