import Kafka

/// What replay does with one dead letter: pure, so every rule is testable without Kafka.
enum ReplayDecision {
    /// The row it counts under, and the record to produce when it is replayed.
    ///
    /// `replayedBefore`: the record is behind its reason's cursor (an earlier run handled it).
    static func decide(
        _ record: KafkaConsumerMessage, request: ReplayRequest, replayedBefore: Bool = false
    ) -> (ReplayReport.Row, KafkaProducerMessage?) {
        let headers = record.headers
        let reason = headers.lastString(DeadLetterHeader.reason) ?? "unknown"
        let source = headers.lastString(DeadLetterHeader.sourceTopic)
        let destination = request.targetTopic ?? source
        func row(_ action: ReplayReport.Action) -> ReplayReport.Row {
            ReplayReport.Row(action: action, reason: reason, destination: destination ?? "-")
        }

        guard let known = DeadLetterReason(rawValue: reason), request.effectiveReasons.contains(known) else {
            return (row(.filtered), nil)
        }
        if replayedBefore { return (row(.replayedBefore), nil) }
        if !request.sourceTopics.isEmpty, !request.sourceTopics.contains(source ?? "") { return (row(.filtered), nil) }
        if request.since != nil || request.until != nil {
            // A dead letter without a readable failure time cannot be placed in the range: left alone.
            guard let failedAt = headers.lastString(DeadLetterHeader.lastFailureAt).flatMap(DeadLetterTime.parse) else {
                return (row(.filtered), nil)
            }
            if let since = request.since, failedAt < since { return (row(.filtered), nil) }
            if let until = request.until, failedAt >= until { return (row(.filtered), nil) }
        }
        let replays = headers.lastString(DeadLetterHeader.replayCount).flatMap { Int($0) } ?? 0
        if replays >= request.maxReplays { return (row(.refusedLimit), nil) }
        guard let destination else { return (row(.noDestination), nil) }
        if request.dryRun { return (row(.wouldReplay), nil) }

        // The original record: key and value untouched, original headers in order, the worker's
        // dlq-* headers dropped but for the history (the replay counter, the first failure, earlier
        // reasons), which a later dead-lettering carries on.
        var replayedHeaders = headers.filter { !$0.key.hasPrefix(DeadLetterHeader.prefix) }
        replayedHeaders.append(KafkaHeader(key: DeadLetterHeader.replayCount, string: String(replays + 1)))
        if let first = headers.lastString(DeadLetterHeader.firstFailureAt) {
            replayedHeaders.append(KafkaHeader(key: DeadLetterHeader.firstFailureAt, string: first))
        }
        let entry = reason + "@" + (headers.lastString(DeadLetterHeader.lastFailureAt) ?? "")
        replayedHeaders.append(
            KafkaHeader(key: DeadLetterHeader.history, string: DeadLetterHeader.appendHistory(entry, to: headers)))
        let message = KafkaProducerMessage(
            topic: destination, key: record.key, value: record.value, headers: replayedHeaders)
        return (row(.replayed), message)
    }
}
