import Foundation

/// Where a certificate credential's certificate stands in its validity, as `check` prints it and
/// the worker says it at start. Apple's push certificates are valid for a year; an expired one is
/// the classic APNs outage, so the last `warningWindow` before expiry is a warning.
package enum CertificateLifetime: Equatable, Sendable {
    case valid(ClosedRange<Date>, now: Date)
    case expiresSoon(ClosedRange<Date>, now: Date)
    case expired(ClosedRange<Date>, now: Date)
    case notYetValid(ClosedRange<Date>, now: Date)

    /// 30 days: the deploy's `ApnsWorkerCertificateExpiresSoon` warns at the same distance.
    package static let warningWindow: TimeInterval = 30 * 86_400

    package init(validity: ClosedRange<Date>, now: Date) {
        if now > validity.upperBound {
            self = .expired(validity, now: now)
        } else if now < validity.lowerBound {
            self = .notYetValid(validity, now: now)
        } else if validity.upperBound.timeIntervalSince(now) <= Self.warningWindow {
            self = .expiresSoon(validity, now: now)
        } else {
            self = .valid(validity, now: now)
        }
    }

    /// Nothing can be sent with it (APNs refuses the TLS handshake).
    package var isUnusable: Bool {
        switch self {
        case .expired, .notYetValid: return true
        case .valid, .expiresSoon: return false
        }
    }

    /// The credential's broken reason (as `APNsCredentialError`'s code names it), when unusable.
    package var reason: String? {
        switch self {
        case .expired: return "certificateExpired"
        case .notYetValid: return "certificateNotYetValid"
        case .valid, .expiresSoon: return nil
        }
    }

    /// For people: `the certificate expires on 2027-03-01T00:00:00Z (in 12 days)`.
    package var sentence: String {
        switch self {
        case .valid(let validity, let now), .expiresSoon(let validity, let now):
            return
                "the certificate expires on \(Self.format(validity.upperBound)) (\(Self.distance(now, validity.upperBound)))"
                + (isSoon ? ": renew it in Apple's developer account and replace it before then" : "")
        case .expired(let validity, let now):
            return
                "the certificate expired on \(Self.format(validity.upperBound)) (\(Self.distance(now, validity.upperBound))): "
                + "APNs refuses it; renew it in Apple's developer account"
        case .notYetValid(let validity, let now):
            return
                "the certificate is not valid before \(Self.format(validity.lowerBound)) (\(Self.distance(now, validity.lowerBound))): "
                + "APNs refuses it until then; check this machine's clock, or deploy it later"
        }
    }

    private var isSoon: Bool {
        if case .expiresSoon = self { return true }
        return false
    }

    private static func format(_ date: Date) -> String { date.formatted(.iso8601) }

    /// `in 12 days`, `3 days ago`, `in 5 hours`.
    private static func distance(_ now: Date, _ date: Date) -> String {
        let seconds = date.timeIntervalSince(now)
        let magnitude = abs(seconds)
        let amount: String
        if magnitude >= 2 * 86_400 {
            amount = "\(Int(magnitude / 86_400)) days"
        } else if magnitude >= 2 * 3_600 {
            amount = "\(Int(magnitude / 3_600)) hours"
        } else {
            amount = "\(max(1, Int(magnitude / 60))) minutes"
        }
        return seconds >= 0 ? "in \(amount)" : "\(amount) ago"
    }
}
