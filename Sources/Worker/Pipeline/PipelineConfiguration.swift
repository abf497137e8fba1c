import Tracing

/// What the pipeline needs to know beyond Kafka's and APNs' own settings.
package struct PipelineConfiguration: Sendable {
    package var inputTopics: [String]
    /// The urgent lane's pipeline: it opens its APNs connections (its own) as it starts.
    package var urgent = false
    /// One result event per input event goes here, keyed by event id.
    package var resultsTopic: String
    package var deadLetterTopic: String
    /// Events between "read" and "result acknowledged"; input is held at this bound until half.
    package var maxInFlight = 10_000
    /// The same bound in bytes of the running events' records: large records reach it first.
    package var maxInFlightBytes = 32 * 1024 * 1024
    /// Events of one credential running at most while others wait (`CredentialShares`); `nil`: no
    /// share (one credential, or a sender that names none).
    package var maxInFlightPerCredential: Int?
    /// Events parked over their credential's share at most; input is held at this bound until half.
    /// `nil`: `maxInFlight`.
    package var maxParked: Int?
    /// Finished events are committed soon after they finish, at most once per this (and at every
    /// revocation, shutdown included).
    package var commitInterval: Duration = .milliseconds(50)
    /// The most commit metadata (the done records above a committed offset) a commit carries:
    /// Kafka's default `offset.metadata.max.bytes`. A broker that allows less refuses the commit,
    /// and the worker halves what it writes.
    package var commitMetadataMaxBytes = 4096
    /// Where done records go when the broker drops commit metadata (`ProgressTopic`); `nil`: nowhere
    /// (a crash or hand-over then pushes again what finished above a waiting event).
    package var progressTopic: String?
    /// How long a revoked partition's in-flight events may take before the partition is let go.
    package var revocationTimeout: Duration = .seconds(30)
    /// How long shutdown waits for in-flight events.
    package var shutdownTimeout: Duration = .seconds(30)
    package var retryPolicy = RetryPolicy()
    /// An event whose record is older than this (by its Kafka timestamp) ends `expired` unsent;
    /// `nil`: no limit.
    package var maxEventAge: Duration? = .seconds(6 * 3600)
    /// A record whose value is larger than this ends `invalid` unsent (and dead-lettered).
    package var maxRecordBytes = 256 * 1024
    /// An output topic that refuses every record (unknown, not authorized) this long stops the
    /// worker with an error; until then input is held and the records are retried.
    package var publishBlockedLimit: Duration = .seconds(300)
    /// A span per event (`EventSpans`) through this tracer, when span export is configured; `nil`:
    /// none (the input's trace context is still carried).
    package var tracer: (any Tracer)?
    /// What an event's span is the child of (`tracing.parent`).
    package var traceParent: TracingSettings.Parent = .producer

    package init(inputTopics: [String], resultsTopic: String, deadLetterTopic: String) {
        self.inputTopics = inputTopics
        self.resultsTopic = resultsTopic
        self.deadLetterTopic = deadLetterTopic
    }
}
