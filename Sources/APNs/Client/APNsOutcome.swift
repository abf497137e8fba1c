import Foundation

/// What the caller should do with an answer (or a failure): the outcome table of docs/worker.md.
public enum APNsOutcome: Sendable, Hashable {
    /// 200.
    case delivered
    /// 410 Unregistered / ExpiredToken: stop sending to this token (APNs' timestamp attached).
    case unregistered(timestampMilliseconds: Int64?)
    /// The notification or token is wrong (400, 404, 405, 413): sending it again cannot succeed.
    case rejected(APNsReason?)
    /// 403 ExpiredProviderToken: the token authenticator was told; send again at once.
    case refreshToken
    /// Credentials are wrong (403 InvalidProviderToken, BadCertificate, …, or the server's certificate
    /// did not verify): fix the configuration; readiness goes red.
    case credentialsBroken(String)
    /// 429, 500, 503, transport loss, timeout, GOAWAY: try again later with backoff.
    /// `perDeviceToken` is set for 429 TooManyRequests (the limit is per token);
    /// TooManyProviderTokenUpdates lands here too: wait, and never refresh the token for it.
    case retryLater(perDeviceToken: Bool, mayHaveReachedAPNs: Bool)

    /// Classifies an HTTP answer.
    public static func classify(_ response: APNsResponse) -> APNsOutcome {
        switch response.status {
        case 200:
            return .delivered
        case 410:
            return .unregistered(timestampMilliseconds: response.timestampMilliseconds)
        case 403:
            switch response.reason {
            case .expiredProviderToken: return .refreshToken
            // The token's key is not related to the key of the connection's first token: the pool
            // retires that connection and the request goes again on another. Nothing is wrong with
            // the credential.
            case .unrelatedKeyIDInToken: return .retryLater(perDeviceToken: false, mayHaveReachedAPNs: true)
            // BadEnvironmentKeyIdInToken (and the spelling without "Id" seen in the wild, kept as an
            // unknown reason) land here: a key scoped to the other environment.
            default: return .credentialsBroken(response.reason?.rawValue ?? "403")
            }
        case 429:
            return .retryLater(
                perDeviceToken: response.reason != .tooManyProviderTokenUpdates, mayHaveReachedAPNs: true)
        case 500...599:
            return .retryLater(perDeviceToken: false, mayHaveReachedAPNs: true)
        case 400:
            // IdleTimeout is about the connection, not the notification.
            if response.reason == .idleTimeout { return .retryLater(perDeviceToken: false, mayHaveReachedAPNs: true) }
            return .rejected(response.reason)
        default:
            return .rejected(response.reason)
        }
    }

    /// Classifies a failure thrown by `send`.
    public static func classify(_ error: any Error) -> APNsOutcome {
        switch error {
        case let error as APNsClientError:
            switch error.code {
            case .serverCertificateRejected, .alpnRefused, .credentialUnusable, .noCredentialForTopic:
                return .credentialsBroken(error.code.rawValue)
            default:
                return .retryLater(perDeviceToken: false, mayHaveReachedAPNs: error.mayHaveReachedAPNs)
            }
        case let error as APNsNotificationError:
            return .rejected(error.apnsReason.map(APNsReason.init))
        case let error as APNsCredentialError:
            return .credentialsBroken(error.code.rawValue)
        default:
            return .retryLater(perDeviceToken: false, mayHaveReachedAPNs: true)
        }
    }
}

extension APNsOutcome: CustomStringConvertible {
    /// For people: `rejected (BadDeviceToken): sending it again cannot succeed`.
    public var description: String {
        switch self {
        case .delivered:
            return "delivered"
        case .unregistered(let timestamp):
            let since = timestamp.map {
                " since " + Date(timeIntervalSince1970: Double($0) / 1000).formatted(.iso8601)
            }
            return "unregistered: the device token is no longer valid\(since ?? ""); stop sending to it"
        case .rejected(let reason):
            return "rejected (\(reason?.rawValue ?? "no reason")): sending it again cannot succeed"
        case .refreshToken:
            return "the provider token expired: sign a new one and send again"
        case .credentialsBroken(let reason):
            switch reason {
            case APNsClientError.Code.serverCertificateRejected.rawValue:
                // Not the provider's key: this machine did not trust the server it reached.
                return "the server's certificate did not verify (\(reason)): the key is not the problem; check the "
                    + "endpoint host, the CA bundle (or caFile), and any TLS-inspecting proxy in between"
            case APNsClientError.Code.alpnRefused.rawValue:
                return "the server does not speak HTTP/2 (\(reason)): not APNs, or a proxy in between"
            default:
                let meaning = APNsReason(reason).meaning.map { ": \($0)" } ?? ""
                return "credentials refused (\(reason)\(meaning)): fix the key or certificate"
            }
        case .retryLater(let perDeviceToken, _):
            return perDeviceToken
                ? "retry later: too many requests for this device token" : "retry later: APNs or the connection failed"
        }
    }
}
