import Threading
import Foundation
import Logging
import NIOCore
import NIOPosix

/// Sends notifications to APNs over pooled HTTP/2 connections.
///
/// One pool per credential; a notification's credential is chosen by its topic's bundle ID (the
/// topic without its push-type suffix), else the default. `send` never retries by itself: it returns
/// APNs' answer or throws an `APNsClientError` saying whether the request may have reached APNs;
/// `APNsOutcome.classify` turns either into the action to take.
public final class APNsClient: Sendable {
    public let configuration: APNsClientConfiguration
    /// The credential new connections authenticate with (a worker with several has one client each:
    /// `APNsSender` routes by topic); `replaceCredential` changes it.
    public var credential: APNsCredential { current.withLock { $0 } }
    private let current: Locked<APNsCredential>
    private let pool: APNsConnectionPool
    private let group: any EventLoopGroup
    private let ownsGroup: Bool
    private let requestTimeout: TimeAmount

    /// - Parameters:
    ///   - credential: the key or certificate every request is sent with.
    ///   - eventLoopGroup: shared with the caller; `nil` makes `configuration.eventLoopThreads`
    ///     threads the client owns.
    public init(
        configuration: APNsClientConfiguration,
        credential: APNsCredential,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger = Logger(label: "apns.client")
    ) throws {
        self.configuration = configuration
        self.current = Locked(credential)
        self.requestTimeout = TimeAmount(configuration.requestTimeout)
        if let eventLoopGroup {
            self.group = eventLoopGroup
            self.ownsGroup = false
        } else {
            self.group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.eventLoopThreads))
            self.ownsGroup = true
        }
        let poolCredential: APNsConnectionPool.Credential
        do {
            poolCredential = try Self.poolCredential(credential, configuration: configuration)
        } catch {
            if ownsGroup { try? group.syncShutdownGracefully() }
            throw error
        }
        pool = APNsConnectionPool(
            settings: Self.poolSettings(configuration, credential: credential), group: group,
            credential: poolCredential, logger: logger)
    }

    /// New connections authenticate with `credential` from now on (a key or certificate reloaded from
    /// its file); those open keep the one they started with and are replaced gradually, one per
    /// `APNsClientConfiguration.replaceInterval` (APNs binds a connection to the key of its first
    /// token, and asks that connections not be opened and closed in bursts). Throws, changing
    /// nothing, when `credential` is of the other kind (token for certificate) or its TLS context
    /// cannot be made.
    public func replaceCredential(_ credential: APNsCredential) throws {
        replaceCredential(with: try prepareReplacement(credential))
    }

    /// A credential made ready to replace a client's (its TLS context made), so that the switch
    /// itself cannot fail: a caller replacing the credential of several clients prepares every one
    /// first, and switches all of them or none.
    public struct CredentialReplacement: Sendable {
        let credential: APNsCredential
        /// `nil`: the credential is the one in use; nothing to switch.
        let pool: APNsConnectionPool.Credential?
    }

    /// Everything `replaceCredential` does that can fail, done and kept; this client is unchanged.
    /// Throws when `credential` is of the other kind (token for certificate) or its TLS context
    /// cannot be made.
    public func prepareReplacement(_ credential: APNsCredential) throws -> CredentialReplacement {
        guard credential.kind == self.credential.kind else {
            throw APNsCredentialError(
                .badIdentifier, "a \(self.credential.kind) credential cannot be replaced by a \(credential.kind) one")
        }
        guard credential.identity != self.credential.identity else {
            return CredentialReplacement(credential: credential, pool: nil)
        }
        return CredentialReplacement(
            credential: credential, pool: try Self.poolCredential(credential, configuration: configuration))
    }

    /// `replaceCredential` with what `prepareReplacement` made: it cannot fail.
    public func replaceCredential(with replacement: CredentialReplacement) {
        guard let pool = replacement.pool else { return }
        current.withLock { $0 = replacement.credential }
        self.pool.rotate(to: pool)
    }

    private static func poolCredential(_ credential: APNsCredential, configuration: APNsClientConfiguration) throws
        -> APNsConnectionPool.Credential
    {
        switch credential {
        case .token(let tokens):
            return .init(sslContext: try OpenSSLContext(trust: configuration.tls.trust, identity: nil), tokens: tokens)
        case .certificate(let certificate):
            return .init(
                sslContext: try OpenSSLContext(trust: configuration.tls.trust, identity: certificate.identity),
                tokens: nil)
        }
    }

    /// One notification, one answer. Validates the notification first (a rule broken throws
    /// `APNsNotificationError` and nothing is sent).
    public func send(_ notification: APNsNotification) async throws -> APNsResponse {
        try await execute(prepare(.notification(notification), credential: credential))
    }

    /// The same, for callers that keep thousands of notifications in flight and cannot afford a task
    /// and a continuation each: `completion` runs exactly once, on a connection's event loop, or on
    /// the caller's thread when the notification was refused before anything was sent (a broken
    /// rule: `APNsNotificationError`; everything else: `APNsClientError`). It must not block.
    public func send(
        _ notification: APNsNotification, completion: @escaping @Sendable (Result<APNsResponse, any Error>) -> Void
    ) {
        send(.notification(notification), completion: completion)
    }

    /// A notification or a broadcast, answered as `send(_:completion:)` answers a notification.
    public func send(
        _ push: APNsPush, completion: @escaping @Sendable (Result<APNsResponse, any Error>) -> Void
    ) {
        sendAll(CollectionOfOne(BatchItem(push, completion: completion)))
    }

    /// One Live Activity broadcast to a channel (`POST /4/broadcasts/apps/<bundle ID>` on the push
    /// host). Validated first (`APNsNotificationError`, nothing sent); the answer carries
    /// `requestID` (`apns-request-id`) and `apnsUniqueID`.
    public func send(_ broadcast: APNsBroadcast) async throws -> APNsResponse {
        try await execute(prepare(.broadcast(broadcast), credential: credential))
    }

    /// The same with a callback, as `send(_:completion:)` for notifications.
    public func send(
        _ broadcast: APNsBroadcast, completion: @escaping @Sendable (Result<APNsResponse, any Error>) -> Void
    ) {
        send(.broadcast(broadcast), completion: completion)
    }

    /// A request by method and path (channel management).
    func send(custom request: APNsCustomRequest) async throws -> APNsResponse {
        try await execute(prepare(content: .custom(request), credential: credential))
    }

    /// One request, awaited; cancelling the task gives it up while it waits for a stream.
    private func execute(_ prepared: Prepared) async throws -> APNsResponse {
        let waiterID = pool.makeWaiterID()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                pool.execute(
                    CollectionOfOne(
                        request(
                            prepared, deadline: NIODeadline.now() + requestTimeout, waiterID: waiterID,
                            answer: .typed { continuation.resume(with: $0) })))
            }
        } onCancel: {
            pool.giveUp(
                waiterID,
                APNsClientError(.deadlineExceeded, "cancelled while waiting for a stream", mayHaveReachedAPNs: false))
        }
    }

    /// One notification (or broadcast) of a batch, and where its answer goes (as `send(_:completion:)`'s).
    ///
    /// The client's public request: a push and its answer. The pool's `Request` adds what the
    /// client adds before queueing (the provider token, the deadline).
    public struct BatchItem: Sendable {
        public var push: APNsPush
        public var completion: @Sendable (Result<APNsResponse, any Error>) -> Void
        /// Goes before every request that is not urgent waiting for a stream, and may take the
        /// streams they leave free (`APNsClientConfiguration.reservedUrgentStreams`).
        public var urgent = false

        public init(
            _ notification: APNsNotification,
            completion: @escaping @Sendable (Result<APNsResponse, any Error>) -> Void
        ) {
            self.init(.notification(notification), completion: completion)
        }

        public init(_ push: APNsPush, completion: @escaping @Sendable (Result<APNsResponse, any Error>) -> Void) {
            self.push = push
            self.completion = completion
        }
    }

    /// Several notifications at once, each answered as `send(_:completion:)` answers one (which is a
    /// batch of one). For a caller that has many at hand: the requests that find a free stream
    /// reach each connection in one hand-over (one event-loop wake-up, one write, one TLS record)
    /// instead of one each.
    public func send(_ batch: [BatchItem]) {
        sendAll(batch)
    }

    /// The one path of every send. Generic so that a single send (`CollectionOfOne`) allocates no
    /// array on its way to the pool.
    private func sendAll(_ batch: some Collection<BatchItem>) {
        let deadline = NIODeadline.now() + requestTimeout
        // Read once for the batch: it sits behind a lock (`replaceCredential` changes it).
        let credential = self.credential
        if batch.count == 1, let item = batch.first {
            if let request = request(for: item, deadline: deadline, credential: credential) {
                pool.execute(CollectionOfOne(request))
            }
            return
        }
        var requests: [APNsConnectionPool.Request] = []
        requests.reserveCapacity(batch.count)
        for item in batch {
            if let request = request(for: item, deadline: deadline, credential: credential) { requests.append(request) }
        }
        pool.execute(requests)
    }

    /// The item checked and given its token, or `nil` after its completion heard why it cannot go.
    private func request(for item: BatchItem, deadline: NIODeadline, credential: APNsCredential)
        -> APNsConnectionPool.Request?
    {
        let prepared: Prepared
        do {
            prepared = try prepare(item.push, credential: credential)
        } catch {
            item.completion(.failure(error))
            return nil
        }
        return request(prepared, deadline: deadline, urgent: item.urgent, answer: .untyped(item.completion))
    }

    /// A request checked, its credential usable, ready to go (the connection that sends it picks its
    /// provider token).
    private struct Prepared: Sendable {
        var content: APNsRequestContent
    }

    /// `credential`: the client's, read once by the caller for a whole batch.
    private func prepare(_ push: APNsPush, credential: APNsCredential) throws -> Prepared {
        switch push {
        case .notification(let notification):
            try notification.validate(for: credential.kind, checkingPayloadSyntax: false)
            return try prepare(content: .notification(notification), credential: credential)
        case .broadcast(let broadcast):
            try broadcast.validate()
            return try prepare(content: .custom(broadcast.request), credential: credential)
        }
    }

    private func prepare(content: APNsRequestContent, credential: APNsCredential) throws -> Prepared {
        switch credential {
        case .token(let authenticator):
            do {
                // Signed once per period and key, then found in the authenticator's cache: a key that
                // cannot sign fails here, not on a connection.
                _ = try authenticator.currentToken()
            } catch {
                throw APNsClientError(.credentialUnusable, "\(error)", mayHaveReachedAPNs: false)
            }
        case .certificate(let identity):
            // An expired (or not yet valid) certificate fails the TLS handshake: said here, with
            // its dates, rather than as a refused connection after a retry.
            try identity.checkValid(at: Date())
        }
        return Prepared(content: content)
    }

    /// The pool's request.
    private func request(
        _ prepared: Prepared, deadline: NIODeadline, waiterID: Int? = nil, urgent: Bool = false,
        answer: APNsConnectionPool.Request.Answer
    ) -> APNsConnectionPool.Request {
        APNsConnectionPool.Request(
            content: prepared.content, deadline: deadline, waiterID: waiterID, urgent: urgent, resends: 0,
            answer: answer)
    }

    /// Opens the pool's connections now (TCP, TLS, HTTP/2 settings) instead of at the first
    /// request, which would otherwise wait for the handshakes: for a caller whose first
    /// notification must not pay them. Returns at once; a connection that fails backs off and
    /// retries as one lost later would. No-op after `shutdown()`.
    public func connect() {
        pool.openConnections()
    }

    /// The connections, streams and waiting requests of its pool, now.
    public var statistics: APNsPoolStatistics { pool.statistics }

    /// Takes no new notifications, lets those in flight finish, closes every connection, and stops
    /// the event loop if the client made it.
    public func shutdown() async {
        await pool.shutdown()
        if ownsGroup { try? await group.shutdownGracefully() }
    }

    private static func poolSettings(_ configuration: APNsClientConfiguration, credential: APNsCredential)
        -> APNsConnectionPool.Settings
    {
        let host = configuration.resolvedHost
        return APNsConnectionPool.Settings(
            host: host,
            port: configuration.port,
            serverName: configuration.tls.serverName ?? host,
            connections: configuration.connectionsPerCredential,
            maximumWaiters: configuration.maximumWaitingRequests,
            reservedUrgentStreams: configuration.reservedUrgentStreams,
            connectTimeout: TimeAmount(configuration.connectTimeout),
            proxy: configuration.proxy,
            replaceInterval: TimeAmount(configuration.replaceInterval),
            reconnect: .init(
                base: TimeAmount(configuration.reconnectBase), maximum: TimeAmount(configuration.reconnectMaximum),
                healthyAfter: .seconds(10)),
            http2: APNsHTTP2Settings(
                maximumStreams: configuration.maximumStreamsPerConnection,
                tokenAuthentication: credential.kind == .token,
                pingInterval: TimeAmount(configuration.pingInterval),
                pingTimeout: TimeAmount(configuration.pingTimeout),
                setupTimeout: TimeAmount(configuration.connectTimeout)))
    }
}
