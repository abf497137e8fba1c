import APNs

/// Sends one notification to APNs and says what came of it. The pipeline's only view of APNs: the
/// real one is `APNsSender` (the APNs client's pools, chosen by topic and environment).
///
/// Callback-shaped rather than `async`: the pipeline keeps thousands of notifications in flight,
/// and a task plus a continuation per notification cost more than the rest of its work.
public protocol NotificationSending: Sendable {
    /// `completion` runs exactly once, on any thread (the caller's included); it must be quick and
    /// must not block.
    func send(
        _ notification: APNsNotification, environment: APNsEnvironment,
        completion: @escaping @Sendable (SendAttempt) -> Void)
    /// Lets requests in flight finish and closes the connections.
    func shutdown() async
}

extension NotificationSending {
    /// The same, awaited.
    public func send(_ notification: APNsNotification, environment: APNsEnvironment) async -> SendAttempt {
        await withCheckedContinuation { continuation in
            send(notification, environment: environment) { continuation.resume(returning: $0) }
        }
    }
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

    public init(
        response: APNsResponse?, error: (any Error)?, outcome: APNsOutcome, credential: String?, duration: Duration
    ) {
        self.response = response
        self.error = error
        self.outcome = outcome
        self.credential = credential
        self.duration = duration
    }
}
