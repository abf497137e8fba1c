import APNs
import Foundation
import Logging

/// `check --strict` proves each credential against the APNs environment it serves, delivering nothing:
/// one request for the all-zero device token, which APNs never issues. APNs checks the provider token
/// (or the client certificate) before the device token, so its answer says whether the credential was
/// taken: 400 BadDeviceToken means it was, 403 means it was not. The request goes as `run` sends:
/// through the configured endpoint, proxy and trust, with the period's provider token (the one the
/// fleet signs, so the probe brings APNs no new token), on one connection.
extension ConfigurationCheck {
    /// The probe's device token: 32 zero bytes, the form of APNs' tokens, which no device has.
    package static let probeDeviceToken = String(repeating: "0", count: 64)

    /// What an answer to the probe says about the credential.
    package enum ProbeVerdict: Equatable, Sendable {
        /// APNs took the credential (it judged the device token next): the answer, for the summary.
        case accepted(String)
        /// APNs refused the credential, or the topic it was asked for: why.
        case refused(String)
        /// The answer says nothing about the credential (APNs busy, unreachable, the probe itself
        /// refused): why.
        case inconclusive(String)
    }

    /// The verdict on an answer (`status`, `reason`) or on a request that had none (`error`).
    package static func verdict(status: Int?, reason: String?, error: (any Error)?) -> ProbeVerdict {
        guard let status else {
            let why = error.map { "\($0)" } ?? "no answer"
            if let error = error as? APNsClientError {
                switch error.code {
                case .credentialUnusable, .serverCertificateRejected, .alpnRefused, .tlsHandshakeFailed:
                    return .refused(why)
                default: break
                }
            }
            if error is APNsCredentialError { return .refused(why) }
            return .inconclusive(why)
        }
        let answer = "\(status)" + (reason.map { " \($0)" } ?? "")
        switch (status, reason) {
        case (200, _): return .accepted("\(answer) (the probe was taken as a notification for a token no device has)")
        case (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"), (410, _):
            return .accepted(answer)
        case (403, _): return .refused(answer)
        case (400, "TopicDisallowed"), (400, "BadTopic"), (400, "MissingTopic"): return .refused(answer)
        case (429, _), (500..., _): return .inconclusive("\(answer): try again")
        default: return .inconclusive("\(answer): the probe itself was refused")
        }
    }

    /// A topic of `credential` to ask APNs for: its first that is not a pattern.
    static func probeTopic(of credential: CredentialSettings) -> String? {
        credential.topics.first { !$0.hasSuffix("*") }
    }

    /// Proves every credential of `credentials` (each loaded already) against its environment; each
    /// verdict is a summary line, or a problem at the credential's line.
    mutating func probeAPNs(
        _ configuration: WorkerConfiguration, credentials: [CredentialSettings], file: String,
        environment: [String: String], timeout: Duration, logger: Logger
    ) async {
        for credential in credentials {
            let location = Self.location(of: credential, in: file)
            let served = credential.environment ?? .production
            guard let topic = Self.probeTopic(of: credential) else {
                problems.append(
                    "\(location): APNs could not be asked: every topic is a pattern; list one app's bundle id among its topics"
                )
                continue
            }
            switch await Self.probe(
                credential, topic: topic, environment: served, settings: configuration.apns,
                processEnvironment: environment, timeout: timeout, logger: logger)
            {
            case .accepted(let answer):
                summary.append(
                    "apns:         \(credential.name) (\(served.rawValue), \(topic)): accepted; APNs answered \(answer) to a token no device has"
                )
            case .refused(let why):
                problems.append(
                    "\(location): APNs (\(served.rawValue)) refused credential \(credential.name) for \(topic): \(why)")
            case .inconclusive(let why):
                problems.append(
                    "\(location): credential \(credential.name) could not be proven against APNs (\(served.rawValue)): \(why)"
                )
            }
        }
    }

    /// One probe request through a sender of its own (one connection), answered or given up after
    /// `timeout`.
    private static func probe(
        _ credential: CredentialSettings, topic: String, environment served: APNsEnvironment, settings: APNsSettings,
        processEnvironment: [String: String], timeout: Duration, logger: Logger
    ) async -> ProbeVerdict {
        var settings = settings
        settings.credentials = [credential]
        settings.connectionsPerCredential = 1
        settings.requestTimeout = timeout
        settings.eventLoopThreads = 1
        let sender: APNsSender
        let notification: APNsNotification
        do {
            // The sender's own lines (its client made, a connection failing) only when they warn.
            var quiet = logger
            quiet.logLevel = max(logger.logLevel, .warning)
            sender = try APNsSender(settings: settings, environment: processEnvironment, logger: quiet)
            notification = APNsNotification(
                deviceToken: try APNsDeviceToken(probeDeviceToken), topic: topic, pushType: .background,
                priority: .powerConsidered, expiration: .immediately,
                payload: Array(#"{"aps":{"content-available":1}}"#.utf8))
        } catch {
            return .refused("\(error)")
        }
        let attempt = await ResumeOnce<SendAttempt?>.first(
            of: {
                await withCheckedContinuation { continuation in
                    sender.send([
                        NotificationRequest(.notification(notification), environment: served) {
                            continuation.resume(returning: $0)
                        }
                    ])
                }
            }, orAfter: timeout + .seconds(1), timedOut: nil)
        await sender.shutdown()
        guard let attempt else { return .inconclusive("no answer within \(timeout)") }
        return verdict(
            status: attempt.response?.status, reason: attempt.response?.reason?.rawValue, error: attempt.error)
    }
}
