import APNs

/// Sends one notification to APNs and says what came of it. The pipeline's only view of APNs: the
/// real one is `APNsSender` (the APNs client's pools, chosen by topic and environment).
public protocol NotificationSending: Sendable {
    func send(_ notification: APNsNotification, environment: APNsEnvironment) async -> SendAttempt
    /// Lets requests in flight finish and closes the connections.
    func shutdown() async
}

/// One request's fate.
public struct SendAttempt: Sendable {
    /// APNs' answer, when there was one.
    public var response: APNsResponse?
    /// The failure, when there was no answer.
    public var error: (any Error)?
    /// What to do about it (DESIGN.md's outcome table).
    public var outcome: APNsOutcome
    /// The configured credential the request used (for readiness), if one matched.
    public var credential: String?
    public var duration: Duration

    public init(response: APNsResponse?, error: (any Error)?, outcome: APNsOutcome, credential: String?, duration: Duration) {
        self.response = response
        self.error = error
        self.outcome = outcome
        self.credential = credential
        self.duration = duration
    }
}
