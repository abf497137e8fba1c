/// Which APNs service a notification goes to. A device token belongs to exactly one of them.
public enum APNsEnvironment: String, Sendable, Hashable, CaseIterable, Codable {
    /// `api.push.apple.com`: apps from the App Store, TestFlight and ad-hoc builds.
    case production
    /// `api.sandbox.push.apple.com`: apps built with a development provisioning profile.
    case development

    /// Apple's host name for this environment.
    public var host: String {
        switch self {
        case .production: "api.push.apple.com"
        case .development: "api.sandbox.push.apple.com"
        }
    }

    /// Port 443 by default; Apple also listens on 2197 for networks that block 443 outbound.
    public static let defaultPort = 443
    /// The alternative port Apple documents.
    public static let alternativePort = 2197
}
