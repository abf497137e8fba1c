import APNs
import Logging
import Foundation

/// What `apns-worker send` does once its flags are parsed: build the client, push one notification
/// (or broadcast), and describe the answer as lines and an exit code. The APNs library has no part
/// of this; the event file form is decoded by the worker's event decoder before it gets here.
package struct OneShotSend: Sendable {
    package var environment: APNsEnvironment = .production
    package var host: String?
    package var port: Int = APNsEnvironment.defaultPort
    package var caFile: String?
    /// Tunnel through this HTTP proxy.
    package var proxy: APNsProxy?
    // Token authentication.
    package var teamID: String?
    package var keyID: String?
    package var keyFile: String?
    // Certificate authentication.
    package var certificateFile: String?
    package var certificateKeyFile: String?
    package var pkcs12File: String?
    package var pkcs12Password: String = ""
    package var timeout: Duration = .seconds(30)

    package init() {}

    /// What happened, for printing; `exitCode` is 0 on 200, 1 when APNs (or a local rule) rejected
    /// the notification, 2 for usage, configuration and connection errors.
    package struct Result: Sendable {
        package var exitCode: Int32
        package var lines: [String]
        package var response: APNsResponse?
    }

    package func credential() throws -> APNsCredential {
        try APNsCredential.load(
            keyFile: keyFile, teamID: teamID, keyID: keyID, certificateFile: certificateFile,
            certificateKeyFile: certificateKeyFile, pkcs12File: pkcs12File, password: pkcs12Password)
    }

    /// Sends `push` (decoded by the worker's event decoder, from a file or from the flags) and
    /// describes the answer. Never throws: every failure becomes lines and an exit code.
    package func run(_ push: APNsPush) async -> Result {
        let client: APNsClient
        do {
            try push.validate()
            var configuration = APNsClientConfiguration(
                environment: environment, host: host, port: port,
                tls: APNsTLSConfiguration(trust: caFile.map { .caFile($0) } ?? .system))
            configuration.connectionsPerCredential = 1
            configuration.proxy = proxy
            configuration.requestTimeout = timeout
            configuration.reconnectMaximum = .seconds(1)
            // A command's output is its answer: the pool's info lines (a connect that failed, then
            // retried) would land on stderr beside it; what went wrong is in the result.
            var quiet = Logger(label: "apns-worker.send")
            quiet.logLevel = .warning
            client = try APNsClient(configuration: configuration, credential: try credential(), logger: quiet)
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
        } catch let error as APNsClientError where error.code == .connectFailed {
            // Nothing was sent: a one-shot command says so, not what a worker would do next.
            await client.shutdown()
            return Result(exitCode: 2, lines: ["error: \(error.message)", "not sent: APNs was not reached"])
        } catch {
            await client.shutdown()
            return Result(exitCode: 2, lines: ["error: \(error)", "outcome: \(APNsOutcome.classify(error))"])
        }
    }
}
