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
    private let routes: [String: APNsCredential]
    private let defaultCredential: APNsCredential?
    private let pools: [ObjectIdentifier: APNsConnectionPool]
    private let group: any EventLoopGroup
    private let ownsGroup: Bool

    /// - Parameters:
    ///   - credentials: by bundle ID (e.g. `com.example.app`); its voip, complication, … topics follow.
    ///   - defaultCredential: for topics not listed.
    ///   - eventLoopGroup: shared with the caller; `nil` makes `configuration.eventLoopThreads`
    ///     threads the client owns.
    public init(
        configuration: APNsClientConfiguration,
        credentials: [String: APNsCredential] = [:],
        defaultCredential: APNsCredential?,
        eventLoopGroup: (any EventLoopGroup)? = nil,
        logger: Logger = Logger(label: "apns.client")
    ) throws {
        self.configuration = configuration
        self.routes = credentials
        self.defaultCredential = defaultCredential
        if let eventLoopGroup {
            self.group = eventLoopGroup
            self.ownsGroup = false
        } else {
            self.group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.eventLoopThreads))
            self.ownsGroup = true
        }
        var pools: [ObjectIdentifier: APNsConnectionPool] = [:]
        for credential in Array(credentials.values) + (defaultCredential.map { [$0] } ?? [])
        where pools[credential.identity] == nil {
            let identity: OpenSSLClientIdentity?
            if case .certificate(let certificate) = credential {
                identity = certificate.identity
            } else {
                identity = nil
            }
            let context: OpenSSLContext
            do {
                context = try OpenSSLContext(trust: configuration.tls.trust, identity: identity)
            } catch {
                if ownsGroup { try? group.syncShutdownGracefully() }
                throw error
            }
            pools[credential.identity] = APNsConnectionPool(
                settings: Self.poolSettings(configuration, credential: credential), group: group, sslContext: context,
                logger: logger)
        }
        self.pools = pools
    }

    /// One notification, one answer. Validates the notification first (a rule broken throws
    /// `APNsNotificationError` and nothing is sent).
    public func send(_ notification: APNsNotification) async throws -> APNsResponse {
        guard let credential = credential(for: notification.topic), let pool = pools[credential.identity] else {
            throw APNsClientError(
                .noCredentialForTopic, "no credential for topic \(notification.topic)", mayHaveReachedAPNs: false)
        }
        try notification.validate(for: credential.kind, checkingPayloadSyntax: false)
        var token: APNsProviderToken?
        if case .token(let authenticator) = credential {
            do {
                token = try authenticator.currentToken()
            } catch {
                throw APNsClientError(.credentialUnusable, "\(error)", mayHaveReachedAPNs: false)
            }
        }
        let deadline = NIODeadline.now() + TimeAmount(configuration.requestTimeout)
        let response = try await pool.execute(notification, token: token, deadline: deadline)
        if response.status == 403, response.reason == .expiredProviderToken,
            case .token(let authenticator) = credential,
            let token
        {
            _ = try? authenticator.tokenExpired(token)
        }
        return response
    }

    /// Takes no new notifications, lets those in flight finish, closes every connection, and stops
    /// the event loop if the client made it.
    public func shutdown() async {
        for pool in pools.values { await pool.shutdown() }
        if ownsGroup { try? await group.shutdownGracefully() }
    }

    private func credential(for topic: String) -> APNsCredential? {
        if routes.isEmpty { return defaultCredential }
        if let exact = routes[topic] { return exact }
        for pushType in APNsPushType.allCases {
            if let suffix = pushType.topicSuffix, topic.hasSuffix(suffix),
                let credential = routes[String(topic.dropLast(suffix.count))]
            {
                return credential
            }
        }
        return defaultCredential
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
            connectTimeout: TimeAmount(configuration.connectTimeout),
            backoff: .init(
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
