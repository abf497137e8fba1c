/// How a consumer group spreads partitions over its members.
package enum KafkaPartitionAssignment: String, Sendable, Hashable, CaseIterable {
    /// Incremental rebalancing: only moved partitions stop. The right default for a scaled-out worker.
    case cooperativeSticky = "cooperative-sticky"
    case range
    case roundRobin = "roundrobin"
}

/// Where a consumer starts in a partition that has no committed offset.
package enum KafkaAutoOffsetReset: String, Sendable, Hashable {
    case earliest
    case latest
    /// Fail rather than guess.
    case error
}

/// A consumer-group member's settings: typed fields for what the worker relies on, and `properties`
/// for any other librdkafka property (`security.protocol`, `sasl.*`, `ssl.*`, …), which wins over
/// the typed fields when both name the same key.
package struct KafkaConsumerConfiguration: Sendable {
    package var bootstrapServers: String
    package var groupID: String
    package var clientID: String = "apns-worker"
    package var partitionAssignment: KafkaPartitionAssignment = .cooperativeSticky
    package var autoOffsetReset: KafkaAutoOffsetReset = .earliest
    /// The broker drops a member it has not heard from for this long.
    package var sessionTimeout: Duration = .seconds(45)
    /// The longest gap allowed between polls (and the longest a rebalance handler may take).
    package var maxPollInterval: Duration = .seconds(300)
    /// How often librdkafka reports statistics (lag per partition); `nil` turns them off.
    package var statisticsInterval: Duration? = nil
    /// Records handed over by librdkafka and not yet taken by the reader. At this many the consumer
    /// pauses its partitions, and resumes at half: memory stays bounded whatever the backlog.
    package var bufferCapacity: Int = 2048
    /// The same bound in bytes (keys, values, headers): large records reach it before the count.
    package var bufferByteCapacity: Int = 32 * 1024 * 1024
    /// An assigned, unpaused partition whose position has not moved for this long while the broker
    /// holds records beyond it is stalled: reported and sought to its position again
    /// (`PartitionStallWatch`). `nil` turns the watch off.
    package var stallBound: Duration? = .seconds(60)
    /// Any librdkafka consumer property, passed through as is.
    package var properties: [String: String] = [:]

    package init(bootstrapServers: String, groupID: String) {
        self.bootstrapServers = bootstrapServers
        self.groupID = groupID
    }

    /// The full librdkafka property set. Offsets are never committed behind the caller's back:
    /// auto-commit and auto offset store are off, because the worker commits only what it finished.
    var librdkafkaProperties: [(String, String)] {
        var typed: [(String, String)] = [
            ("bootstrap.servers", bootstrapServers),
            ("group.id", groupID),
            ("client.id", clientID),
            ("partition.assignment.strategy", partitionAssignment.rawValue),
            ("auto.offset.reset", autoOffsetReset.rawValue),
            ("session.timeout.ms", String(sessionTimeout.milliseconds)),
            ("max.poll.interval.ms", String(maxPollInterval.milliseconds)),
            ("enable.auto.commit", "false"),
            ("enable.auto.offset.store", "false"),
            ("enable.partition.eof", "false"),
            // librdkafka's own prefetch, in front of the hand-over buffer: 64 MB by default, bounded
            // lower so that the consumer's memory stays in the tens of megabytes whatever the
            // record size (fetch.max.bytes follows it unless set).
            ("queued.max.messages.kbytes", "16384"),
        ]
        if let statisticsInterval {
            typed.append(("statistics.interval.ms", String(statisticsInterval.milliseconds)))
        }
        // Last, so that it wins: `groupID` is the group, whatever `properties` say. A member moved to
        // another group by a property would commit where nothing else of its owner looks.
        return merged(typed, properties.filter { $0.key != "group.id" }) + [("group.id", groupID)]
    }

    /// What librdkafka runs with once `properties` are applied over the typed fields, for the code that
    /// bounds its own waits on these settings: a property (`max.poll.interval.ms: 600000`) wins over
    /// the typed default, so the typed field alone may be wrong. Read once, where the consumer is made.
    package struct Effective: Sendable, Equatable {
        package var maxPollInterval: Duration
        package var sessionTimeout: Duration
        package var clientID: String
        /// A static member's id (`group.instance.id`), if any.
        package var groupInstanceID: String?
    }

    /// The effective settings; the typed fields where librdkafka refuses the properties (creating the
    /// consumer then fails with librdkafka's reason).
    package var effective: Effective {
        let config = try? RDKafkaConfig(properties: librdkafkaProperties)
        func milliseconds(_ name: String) -> Duration? {
            config?.value(of: name).flatMap { Int64($0) }.map { .milliseconds($0) }
        }
        let instance = config?.value(of: "group.instance.id")
        return Effective(
            maxPollInterval: milliseconds("max.poll.interval.ms") ?? maxPollInterval,
            sessionTimeout: milliseconds("session.timeout.ms") ?? sessionTimeout,
            clientID: config?.value(of: "client.id") ?? clientID,
            groupInstanceID: instance?.isEmpty == false ? instance : nil)
    }
}

/// A producer's settings. Idempotent by default (`enable.idempotence=true`, hence `acks=all`): a
/// retried send is never stored twice and order per partition holds.
package struct KafkaProducerConfiguration: Sendable {
    package var bootstrapServers: String
    package var clientID: String = "apns-worker"
    package var idempotent: Bool = true
    /// How long a record may wait in the local queue for more to batch with it.
    package var linger: Duration = .milliseconds(5)
    /// A record not acknowledged within this time fails with `messageTimedOut` (librdkafka retries
    /// until then: a broker that is down and comes back in time loses nothing).
    package var deliveryTimeout: Duration = .seconds(300)
    /// `none`, `gzip`, `snappy`, `lz4` or `zstd`.
    package var compression: String = "lz4"
    /// Any librdkafka producer property, passed through as is.
    package var properties: [String: String] = [:]

    package init(bootstrapServers: String) {
        self.bootstrapServers = bootstrapServers
    }

    var librdkafkaProperties: [(String, String)] {
        var typed: [(String, String)] = [
            ("bootstrap.servers", bootstrapServers),
            ("client.id", clientID),
            ("enable.idempotence", idempotent ? "true" : "false"),
            ("linger.ms", String(linger.milliseconds)),
            ("message.timeout.ms", String(deliveryTimeout.milliseconds)),
            ("compression.codec", compression),
        ]
        if idempotent { typed.append(("acks", "all")) }
        return merged(typed, properties)
    }

    /// How long librdkafka tries to deliver a record (`message.timeout.ms`, which a property may set
    /// over `deliveryTimeout`): what the producer's own waits for an acknowledgement are bounded by.
    package var effectiveDeliveryTimeout: Duration {
        (try? RDKafkaConfig(properties: librdkafkaProperties))?.value(of: "message.timeout.ms")
            .flatMap { Int64($0) }.map { .milliseconds($0) } ?? deliveryTimeout
    }
}

extension KafkaConsumerConfiguration {
    /// Has librdkafka check every property, without connecting: an unknown property or a value it
    /// refuses throws `invalidArgument` naming the property (a secret's value is never quoted).
    package func validate() throws(KafkaError) {
        _ = try RDKafkaConfig(properties: librdkafkaProperties)
    }
}

extension KafkaProducerConfiguration {
    /// Has librdkafka check every property, without connecting (see the consumer's).
    package func validate() throws(KafkaError) {
        _ = try RDKafkaConfig(properties: librdkafkaProperties)
    }
}

/// librdkafka's own reading of its properties, for checks that must see through its aliases
/// (`request.required.acks` is `acks`) and synonyms (`largest` and `end` are `latest`).
package enum KafkaPropertyReading {
    /// `name`'s value, as librdkafka prints it, once `properties` are applied in order to a new
    /// configuration; `nil` when librdkafka refuses one of them or does not know `name`.
    package static func value(of name: String, after properties: [(String, String)]) -> String? {
        (try? RDKafkaConfig(properties: properties))?.value(of: name)
    }

    /// Why librdkafka refuses `name` set to `value` on its own (an unknown property, a value out of
    /// range), or `nil` when it takes it.
    package static func refusal(of name: String, value: String) -> KafkaError? {
        do {
            _ = try RDKafkaConfig(properties: [(name, value)])
            return nil
        } catch {
            return error
        }
    }
}

/// Typed values first, pass-through properties after (so they override), keys sorted for stable errors.
private func merged(_ typed: [(String, String)], _ properties: [String: String]) -> [(String, String)] {
    typed.filter { properties[$0.0] == nil } + properties.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
}

extension Duration {
    /// Whole milliseconds, rounded down, as librdkafka's `*.ms` properties want them.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
