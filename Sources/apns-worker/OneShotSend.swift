import Foundation

/// Everything `apns-worker send` needs to push one notification from command-line flags, kept here
/// so the executable only parses flags and prints. (The JSON event file form belongs to the
/// worker's event decoder and is not handled here.)
public struct APNsOneShotSend: Sendable {
    public var environment: APNsEnvironment = .production
    public var host: String?
    public var port: Int = APNsEnvironment.defaultPort
    public var caFile: String?
    /// Tunnel through this HTTP proxy.
    public var proxy: APNsProxy?
    // Token authentication.
    public var teamID: String?
    public var keyID: String?
    public var keyFile: String?
    // Certificate authentication.
    public var certificateFile: String?
    public var certificateKeyFile: String?
    public var pkcs12File: String?
    public var pkcs12Password: String = ""
    // The notification.
    public var topic: String = ""
    public var pushType: APNsPushType = .alert
    public var priority: APNsPriority?
    public var expiration: Int64?
    public var collapseID: String?
    public var apnsID: String?
    public var deviceToken: String = ""
    public var payload: String = ""
    public var timeout: Duration = .seconds(30)

    public init() {}

    /// What happened, for printing; `exitCode` is 0 on 200, 1 when APNs (or a local rule) rejected
    /// the notification, 2 for usage, configuration and connection errors.
    public struct Result: Sendable {
        public var exitCode: Int32
        public var lines: [String]
        public var response: APNsResponse?
    }

    public func credential() throws -> APNsCredential {
        try APNsCredential.load(
            keyFile: keyFile, teamID: teamID, keyID: keyID, certificateFile: certificateFile,
            certificateKeyFile: certificateKeyFile, pkcs12File: pkcs12File, password: pkcs12Password)
    }

    public func notification() throws -> APNsNotification {
        APNsNotification(
            deviceToken: try APNsDeviceToken(deviceToken), topic: topic, pushType: pushType, priority: priority,
            expiration: expiration.map(APNsExpiration.init(secondsSince1970:)), collapseID: collapseID,
            apnsID: try apnsID.map { try APNsNotificationID($0) }, payload: Array(payload.utf8))
    }

    /// Sends and describes the answer. Never throws: every failure becomes lines and an exit code.
    /// `prepared` replaces the notification the flags describe (an event file decoded by the worker,
    /// which may be a broadcast).
    public func run(_ prepared: APNsPush? = nil) async -> Result {
        let push: APNsPush
        let client: APNsClient
        do {
            push = try prepared ?? .notification(self.notification())
            try push.validate()
            var configuration = APNsClientConfiguration(
                environment: environment, host: host, port: port,
                tls: APNsTLSConfiguration(trust: caFile.map { .caFile($0) } ?? .system))
            configuration.connectionsPerCredential = 1
            configuration.proxy = proxy
            configuration.requestTimeout = timeout
            configuration.reconnectMaximum = .seconds(1)
            client = try APNsClient(configuration: configuration, credential: try credential())
        } catch let error as APNsNotificationError {
            return Result(exitCode: 1, lines: ["invalid notification: \(error)"])
        } catch {
            return Result(exitCode: 2, lines: ["configuration error: \(error)"])
        }
        do {
            let response: APNsResponse
            switch push {
            case .notification(let notification): response = try await client.send(notification)
            case .broadcast(let broadcast): response = try await client.send(broadcast)
            }
            await client.shutdown()
            var lines = ["status: \(response.status)"]
            if case .broadcast = push {
                lines.append("apns-request-id: \(response.requestID ?? "-")")
            } else {
                lines.append("apns-id: \(response.apnsID ?? "-")")
            }
            if let unique = response.apnsUniqueID { lines.append("apns-unique-id: \(unique)") }
            if let reason = response.reason { lines.append("reason: \(reason.rawValue)") }
            if let timestamp = response.timestampMilliseconds { lines.append("timestamp: \(timestamp)") }
            lines.append("outcome: \(APNsOutcome.classify(response))")
            return Result(exitCode: response.status == 200 ? 0 : 1, lines: lines, response: response)
        } catch let error as APNsNotificationError {
            await client.shutdown()
            return Result(exitCode: 1, lines: ["invalid notification: \(error)"])
        } catch {
            await client.shutdown()
            return Result(exitCode: 2, lines: ["error: \(error)", "outcome: \(APNsOutcome.classify(error))"])
        }
    }
}
