import APNs

/// Sends one notification (or Live Activity broadcast) to APNs and says what came of it. The pipeline's only view of APNs: the
/// real one is `APNsSender` (the APNs client's pools, chosen by topic and environment).
///
/// Callback-shaped rather than `async`: the pipeline keeps thousands of notifications in flight,
/// and a task plus a continuation per notification cost more than the rest of its work.
package protocol NotificationSending: Sendable {
    /// Sends each request; each request's `completion` runs exactly once, on any thread (the
    /// caller's included), and must be quick and must not block. The one way in: the pipeline's
    /// reader hands over what it decoded from one read, so that a sender can pass them on in one go
    /// (the APNs client: one event-loop wake-up and one write per connection for the lot); one
    /// request is a batch of one.
    func send(_ requests: [NotificationRequest])
    /// Lets requests in flight finish and closes the connections.
    func shutdown() async
    /// The credential a notification for `topic` in `environment` is sent with, where the sender
    /// has several: the pipeline's unit of fairness (`CredentialShares`). `nil`: none matches, or
    /// the sender does not say (every event then runs outside any share).
    func credential(forTopic topic: String, environment: APNsEnvironment) -> String?
    /// Opens the connections now rather than at the first request, without waiting for them.
    func connect()
}

extension NotificationSending {
    /// Nothing to open ahead (a sender without connections of its own).
    package func connect() {}
}

/// A notification (or broadcast) to send and where its attempt goes (`NotificationSending.send(_:)`).
///
/// The worker's request, not the client's `APNsClient.BatchItem`: it carries what only the worker
/// knows, the environment that picks the client (one client per credential and environment) and
/// a callback that takes a `SendAttempt` (the answer with its credential and duration).
package struct NotificationRequest: Sendable {
    package var push: APNsPush
    package var environment: APNsEnvironment
    package var completion: @Sendable (SendAttempt) -> Void

    package init(
        _ push: APNsPush, environment: APNsEnvironment, completion: @escaping @Sendable (SendAttempt) -> Void
    ) {
        self.push = push
        self.environment = environment
        self.completion = completion
    }
}

extension NotificationSending {
    package func credential(forTopic topic: String, environment: APNsEnvironment) -> String? { nil }

    /// One request: a batch of one.
    package func send(
        _ push: APNsPush, environment: APNsEnvironment, completion: @escaping @Sendable (SendAttempt) -> Void
    ) {
        send([NotificationRequest(push, environment: environment, completion: completion)])
    }

    /// One request, awaited.
    package func send(_ push: APNsPush, environment: APNsEnvironment) async -> SendAttempt {
        await withCheckedContinuation { continuation in
            send(push, environment: environment) { continuation.resume(returning: $0) }
        }
    }
}

/// One request's fate.
package struct SendAttempt: Sendable {
    /// APNs' answer, when there was one.
    package var response: APNsResponse?
    /// The failure, when there was no answer.
    package var error: (any Error)?
    /// What to do about it (the outcome table of docs/worker.md).
    package var outcome: APNsOutcome
    /// The configured credential the request used (for readiness), if one matched.
    package var credential: String?
    package var duration: Duration

    package init(
        response: APNsResponse?, error: (any Error)?, outcome: APNsOutcome, credential: String?, duration: Duration
    ) {
        self.response = response
        self.error = error
        self.outcome = outcome
        self.credential = credential
        self.duration = duration
    }
}
