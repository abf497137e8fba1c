import Threading
import Logging
import NIOCore
import NIOPosix
import NIOConcurrencyHelpers

/// The connections of one (environment, credential): opens them, hands each request to the least
/// loaded one, queues (bounded) when every stream is busy, replaces connections that end.
///
/// All decisions are `StateMachine`'s, taken under one lock; the I/O they call for
/// (connect, schedule, hand requests to a connection, fail a request, close) happens after the lock
/// is released (`perform`). Requests go in batches (`execute`), one request being a batch of one.
final class APNsConnectionPool: Sendable {
    typealias Completion = @Sendable (Result<APNsResponse, APNsClientError>) -> Void
    typealias Machine = StateMachine<Request, APNsConnection>

    /// A request on its way to a stream, with what the pool owns for it: its deadline, its place among
    /// the waiters, its resends. (Its provider token is the connection's that sends it.)
    ///
    /// A class: it passes through the machine's queue, an action and a completion, and a copy of
    /// the struct it was cost a memmove and a retain of each of its strings and arrays every time
    /// (measured: 7% of the client's throughput).
    final class Request: Sendable {
        let content: APNsRequestContent
        let deadline: NIODeadline
        /// Runs exactly once with the answer, on the connection's event loop (or on the caller's
        /// thread when nothing could be sent): `complete(_:)`.
        private let answer: Answer
        /// Names the request while it waits for a stream, for a caller that may give it up
        /// (`giveUp`); `nil`: the pool picks one.
        let waiterID: Int?
        /// Served before the requests that are not (`StateMachine.acquire`).
        let urgent: Bool
        /// How often it went again after the server did not process it.
        let resends: Int

        /// The caller's callback, typed or not: the client's public callbacks take `any Error`,
        /// and a closure made per request only to convert the error was an allocation each.
        enum Answer: Sendable {
            case typed(Completion)
            case untyped(@Sendable (Result<APNsResponse, any Error>) -> Void)
        }

        init(
            content: APNsRequestContent, deadline: NIODeadline, waiterID: Int?, urgent: Bool = false, resends: Int,
            answer: Answer
        ) {
            self.content = content
            self.deadline = deadline
            self.waiterID = waiterID
            self.urgent = urgent
            self.resends = resends
            self.answer = answer
        }

        /// The same request, sent once more.
        func again() -> Request {
            Request(
                content: content, deadline: deadline, waiterID: waiterID, urgent: urgent, resends: resends + 1,
                answer: answer)
        }

        /// Gives the caller its answer.
        func complete(_ result: Result<APNsResponse, APNsClientError>) {
            switch answer {
            case .typed(let completion): completion(result)
            case .untyped(let completion): completion(result.mapError { $0 })
            }
        }
    }

    struct Settings: Sendable {
        var host: String
        var port: Int
        var serverName: String
        var connections: Int
        var maximumWaiters: Int
        var reservedUrgentStreams: Int = 0
        var connectTimeout: TimeAmount
        /// Tunnel through this HTTP proxy (CONNECT) instead of connecting to `host` directly.
        var proxy: APNsProxy?
        /// After a credential is replaced (`rotate`), one connection of the one before is replaced
        /// per interval; the first at a random point within the first interval, so that the pods of a
        /// fleet that see a new key file together do not reconnect together.
        var replaceInterval: TimeAmount = .seconds(15)
        var reconnect: Machine.Reconnect
        var http2: APNsHTTP2Settings
    }

    /// What a connection authenticates with: the TLS context (trust, and a client certificate with
    /// certificate authentication) and, with token authentication, the key's tokens.
    struct Credential: Sendable {
        var sslContext: OpenSSLContext
        var tokens: APNsTokenAuthenticator?
    }

    let settings: Settings
    let group: any EventLoopGroup
    /// By generation: the one new connections open with (the machine's `generation`), and those
    /// connections still being opened may have been given just before a `rotate`.
    let credentials: Locked<[Int: Credential]>
    let logger: Logger
    /// A pthread mutex (`Locked`) rather than Synchronization.Mutex: ThreadSanitizer sees
    /// through pthread locks, so its reports on this module stay meaningful.
    let state: Locked<Machine>
    /// Connections retired because APNs would not take their token any more, by its reason.
    let retired = Locked<[String: Int]>([:])
    /// The answers after which a connection is retired (`answered`). Not ExpiredProviderToken: a
    /// connection's token is at most the schedule's switch age old by this process's clock, so APNs
    /// calling it expired means the clock is behind, and a new connection would take the same token.
    static let retiringReasons: Set<APNsReason> = [.tooManyProviderTokenUpdates, .unrelatedKeyIDInToken]

    init(settings: Settings, group: any EventLoopGroup, credential: Credential, logger: Logger) {
        self.settings = settings
        self.group = group
        self.credentials = Locked([0: credential])
        self.logger = logger
        self.state = Locked(
            Machine(
                connections: settings.connections, maximumWaiters: settings.maximumWaiters,
                reconnect: settings.reconnect, reservedStreams: settings.reservedUrgentStreams))
    }

    /// Sends each request on the least loaded connection with a free stream: one lock for the lot,
    /// and one hand-over per connection (one event-loop wake-up, one write, one TLS record for a
    /// caller with many requests at hand). Requests that find no free stream wait, in order, and
    /// give up at their deadline.
    ///
    /// Generic over the collection so that one request (`CollectionOfOne`) allocates no array.
    func execute(_ requests: some Collection<Request>) {
        var connecting: [Machine.Action] = []
        if requests.count == 1, let request = requests.first {
            // One request (a single send, a resend): the steps below without their arrays.
            let (id, acquired) = state.withLock { machine in
                let id = request.waiterID ?? machine.makeWaiterID()
                return (id, machine.acquire(request, waiterID: id, urgent: request.urgent, connecting: &connecting))
            }
            perform(connecting)
            switch acquired {
            case .dispatched(let connectionID, let connection):
                connection.send(http2Request(request, connectionID: connectionID, on: connection))
            case .waiting: giveUpAtDeadlines([(id, request.deadline)])
            case .refused(let error): finish(request, .failure(error))
            }
            return
        }
        var outcomes: [(request: Request, id: Int, acquired: Machine.Acquired)] = []
        outcomes.reserveCapacity(requests.count)
        state.withLock { machine in
            for request in requests {
                let id = request.waiterID ?? machine.makeWaiterID()
                outcomes.append(
                    (
                        request, id,
                        machine.acquire(request, waiterID: id, urgent: request.urgent, connecting: &connecting)
                    ))
            }
        }
        perform(connecting)
        var perConnection = BatchesByDestination<APNsConnection, APNsHTTP2Request>(reserving: outcomes.count)
        var waiting: [(id: Int, deadline: NIODeadline)] = []
        for (request, id, acquired) in outcomes {
            switch acquired {
            case .dispatched(let connectionID, let connection):
                perConnection.append(http2Request(request, connectionID: connectionID, on: connection), to: connection)
            case .waiting: waiting.append((id, request.deadline))
            case .refused(let error): finish(request, .failure(error))
            }
        }
        for (connection, requests) in perConnection.batches { connection.send(contentsOf: requests) }
        if !waiting.isEmpty { giveUpAtDeadlines(waiting) }
    }

    /// How often a request the server did not process (`APNsClientError.wasNotProcessed`: refused
    /// by a GOAWAY, or given to a connection that was closing) goes again on another connection
    /// before its failure is handed back. A GOAWAY refuses every request queued on its connection at
    /// once (hundreds under load); handing each back as a failure made callers count an attempt
    /// APNs never saw, and two GOAWAYs in a row used up a retry budget. Bounded, so that a server
    /// that refuses everything cannot keep a request circling; the deadline bounds it too.
    static let maximumResends = 3

    /// The request's answer, or its failure, to its caller; a failure the server did not process
    /// sends it again instead, while it may.
    private func finish(_ request: Request, _ result: Result<APNsResponse, APNsClientError>) {
        if case .failure(let error) = result, error.wasNotProcessed, request.resends < Self.maximumResends,
            NIODeadline.now() < request.deadline
        {
            execute(CollectionOfOne(request.again()))
            return
        }
        request.complete(result)
    }

    /// The request on connection `id`, signed with its key; its answer (`answered`) gives the stream
    /// back before its caller hears it.
    private func http2Request(_ request: Request, connectionID id: Int, on connection: APNsConnection)
        -> APNsHTTP2Request
    {
        APNsHTTP2Request(
            content: request.content, tokens: connection.tokens, deadline: request.deadline,
            answer: .pool(self, request, connectionID: id))
    }

    /// A request's answer from connection `id`.
    func answered(_ request: Request, _ result: Result<APNsResponse, APNsClientError>, connectionID id: Int) {
        if case .success(let response) = result, let reason = response.reason,
            Self.refusingOldCredential.contains(reason),
            refusedOldCredential(request, result, reason: reason, connectionID: id)
        {
            return
        }
        if case .success(let response) = result, let reason = response.reason, Self.retiringReasons.contains(reason) {
            // APNs will not take this connection's token any more: a token from a key unrelated to
            // its first (UnrelatedKeyIdInToken, a key rotation), or a token change it calls too soon
            // (TooManyProviderTokenUpdates: the connection is unusable for a while). A new connection
            // starts with the newest token; it opens after the usual backoff, so that a pod that keeps
            // meeting this does not open and close connections in a loop.
            logger.warning(
                "retiring the connection: \(reason.rawValue)", metadata: ["connection": "\(id)", "reason": "\(reason)"])
            retired.withLock { $0[reason.rawValue, default: 0] += 1 }
            update { $0.retire(id: id, now: .now()) }
        }
        update { $0.release(connectionID: id) }
        finish(request, result)
    }

    var statistics: APNsPoolStatistics {
        var statistics = state.withLock { $0.statistics }
        statistics.retiredConnections = retired.withLock { $0 }
        return statistics
    }

    /// A fresh id for a request that may wait, for `Request.waiterID` and `giveUp`.
    func makeWaiterID() -> Int {
        state.withLock { $0.makeWaiterID() }
    }

    /// Opens the connections now rather than at the first request.
    func openConnections() {
        update { $0.openIdleSlots() }
    }

    /// Stops taking requests, waits for every accepted one to finish, then closes the connections
    /// (each sends GOAWAY(NO_ERROR) first).
    func shutdown() async {
        let drained = group.next().makePromise(of: Void.self)
        update { $0.shutdown(drained: drained) }
        try? await drained.futureResult.get()
        let (connections, timers) = state.withLock { $0.closeAll() }
        for timer in timers { timer.cancel() }
        for connection in connections {
            try? await connection.channel.close()
        }
        for connection in connections {
            try? await connection.channel.closeFuture.get()
        }
    }

    // MARK: Waiting

    /// Fails the request `waiterID` with `error` if it is still waiting for a stream.
    func giveUp(_ waiterID: Int, _ error: APNsClientError) {
        update { $0.giveUp(waiterIDs: [waiterID], error) }
    }

    /// One timer per deadline (a batch shares one) gives up its requests that still wait then.
    private func giveUpAtDeadlines(_ waiting: [(id: Int, deadline: NIODeadline)]) {
        var byDeadline: [(deadline: NIODeadline, ids: Set<Int>)] = []
        for (id, deadline) in waiting {
            if let index = byDeadline.firstIndex(where: { $0.deadline == deadline }) {
                byDeadline[index].ids.insert(id)
            } else {
                byDeadline.append((deadline, [id]))
            }
        }
        let error = APNsClientError(.deadlineExceeded, "no stream free before the deadline", mayHaveReachedAPNs: false)
        for (deadline, ids) in byDeadline {
            group.any().scheduleTask(deadline: deadline) { [weak self] in
                self?.update { $0.giveUp(waiterIDs: ids, error) }
            }
        }
    }

    // MARK: Actions

    /// Runs a state machine step under the lock, then performs its actions outside it.
    private func update(_ step: (inout Machine) -> [Machine.Action]) {
        perform(state.withLock { step(&$0) })
    }

    func perform(_ actions: [Machine.Action]) {
        guard !actions.isEmpty else { return }
        // One request sent (a single send, the common case of a stream given back to a waiter): no
        // per-connection gathering.
        if actions.count == 1, case .dispatch(let request, let id, let connection) = actions[0] {
            connection.send(http2Request(request, connectionID: id, on: connection))
            return
        }
        var perConnection = BatchesByDestination<APNsConnection, APNsHTTP2Request>(reserving: actions.count)
        for action in actions {
            switch action {
            case .dispatch(let request, let id, let connection):
                perConnection.append(http2Request(request, connectionID: id, on: connection), to: connection)
            case .fail(let request, let error):
                finish(request, .failure(error))
            case .connect(let slot, let id, let generation):
                connect(slot: slot, id: id, generation: generation)
            case .reconnect(let slot, let delay, let epoch):
                let timer = group.any().scheduleTask(in: delay) { [weak self] () -> Void in
                    self?.update { $0.reconnectDue(slot: slot, epoch: epoch) }
                }
                state.withLock { $0.reconnectScheduled(slot: slot, epoch: epoch, timer: timer) }?.cancel()
            case .close(let connection):
                connection.channel.close(promise: nil)
            case .drained(let promise):
                promise.succeed()
            }
        }
        for (connection, requests) in perConnection.batches { connection.send(contentsOf: requests) }
    }

    // MARK: Connecting

    private func connect(slot: Int, id: Int, generation: Int) {
        let settings = self.settings
        // Every generation a connect may name is kept (`rotate` keeps the last three).
        let credential = credentials.withLock { $0[generation] ?? $0[$0.keys.max() ?? 0]! }
        let sslContext = credential.sslContext
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
                    let connection = APNsConnection(channel: channel, handler: http2, tokens: credential.tokens)
                    self?.update { $0.connectionCreated(id: id, connection: connection) }
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
                    ?? APNsClientError(
                        .connectFailed, Self.describeConnectFailure(error, host: address.0, port: address.1),
                        mayHaveReachedAPNs: false)
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
                self.update { $0.connectionClosed(id: id, error: error, now: .now()) }
            })
    }
}
