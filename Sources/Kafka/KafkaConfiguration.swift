/// How a consumer group spreads partitions over its members.
package enum KafkaPartitionAssignment: String, Sendable, Hashable, CaseIterable {
    /// Incremental rebalancing: only moved partitions stop. The right default for a scaled-out worker.
    case cooperativeSticky = "cooperative-sticky"
    case range
    case roundRobin = "roundrobin"
}

/// Which consumer group protocol a member speaks.
package enum KafkaGroupProtocol: String, Sendable, Hashable, CaseIterable {
    /// The classic protocol: every rebalance is a group-wide join and sync; the members choose the
    /// assignment (`partition.assignment.strategy`) and the session and heartbeat timings.
    case classic
    /// The next-generation protocol (KIP-848, Apache Kafka 4.0 and later): the group coordinator
    /// assigns and moves partitions one at a time with no group-wide barrier, and owns the session
    /// timeout, the heartbeat interval and the assignor. Rebalances are always incremental.
    case consumer

    /// A librdkafka property this protocol leaves to the broker, which librdkafka refuses when
    /// it is set at all (even to its default value), and where the broker's setting is.
    package struct BrokerOwned: Sendable, Hashable {
        package var property: String
        package var instead: String
    }

    /// What librdkafka refuses under this protocol (none under the classic one).
    package var brokerOwned: [BrokerOwned] {
        switch self {
        case .classic: []
        case .consumer:
            [
                BrokerOwned(
                    property: "session.timeout.ms",
                    instead: "the broker's group.consumer.session.timeout.ms (45 s unless the broker or the group "
                        + "sets another)"),
                BrokerOwned(
                    property: "heartbeat.interval.ms",
                    instead: "the broker's group.consumer.heartbeat.interval.ms (5 s unless set)"),
                BrokerOwned(
                    property: "partition.assignment.strategy",
                    instead: "group.remote.assignor (uniform or range; every assignor of this protocol is sticky)"),
                BrokerOwned(property: "group.protocol.type", instead: "nothing: the protocol has no type"),
            ]
        }
    }

    /// The broker's session timeout under the next-generation protocol when neither it nor the group
    /// sets another (Apache Kafka's `group.consumer.session.timeout.ms` default).
    package static let brokerDefaultSessionTimeout: Duration = .seconds(45)
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
    /// The group protocol. Under `.consumer`, `partitionAssignment` and `sessionTimeout` are not
    /// passed to librdkafka: the broker owns them (`KafkaGroupProtocol.brokerOwned`).
    package var groupProtocol: KafkaGroupProtocol = .classic
    package var partitionAssignment: KafkaPartitionAssignment = .cooperativeSticky
    package var autoOffsetReset: KafkaAutoOffsetReset = .earliest
    /// The broker drops a member it has not heard from for this long (the classic protocol only: under
    /// the next-generation one the broker sets it).
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
    package var librdkafkaProperties: [(String, String)] {
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
        // librdkafka refuses what the broker owns under the next-generation protocol, even set to
        // its default: leave the typed ones out.
        let brokerOwned = Set(groupProtocol.brokerOwned.map(\.property))
        typed.removeAll { brokerOwned.contains($0.0) }
        // Last, so that they win: `groupID` is the group and `groupProtocol` its protocol, whatever
        // `properties` say. A member moved to another group by a property would commit where nothing
        // else of its owner looks; one speaking another protocol than its typed settings were made for
        // would be refused or misread. The classic protocol is librdkafka's default: not named, so
        // that a library too old to know the property still reads the configuration (and is refused
        // for its version, not for this).
        let owned: Set<String> = ["group.id", "group.protocol"]
        return merged(typed, properties.filter { !owned.contains($0.key) }) + [("group.id", groupID)]
            + (groupProtocol == .consumer ? [("group.protocol", groupProtocol.rawValue)] : [])
    }

    /// What librdkafka runs with once `properties` are applied over the typed fields, for the code that
    /// bounds its own waits on these settings: a property (`max.poll.interval.ms: 600000`) wins over
    /// the typed default, so the typed field alone may be wrong. Read once, where the consumer is made.
    package struct Effective: Sendable, Equatable {
        package var maxPollInterval: Duration
        /// Under the next-generation protocol, the broker's default (the client cannot read the broker's).
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
            sessionTimeout: groupProtocol == .consumer
                ? KafkaGroupProtocol.brokerDefaultSessionTimeout
                : milliseconds("session.timeout.ms") ?? sessionTimeout,
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
    /// refuses throws `invalidArgument` naming the property (a secret's value is never quoted). What
    /// librdkafka only refuses when the client is made (a property the group protocol leaves to the
    /// broker) is checked here too.
    package func validate() throws(KafkaError) {
        _ = try RDKafkaConfig(properties: librdkafkaProperties)
        for (name, value) in properties.sorted(by: { $0.key < $1.key }) {
            if let owned = groupProtocol.brokerOwnedProperty(set: name, to: value) {
                throw KafkaError.invalidConfiguration(name, groupProtocol.refusal(of: owned))
            }
        }
    }
}

extension KafkaGroupProtocol {
    /// The broker-owned property that setting `name` to `value` sets (itself, or through one of
    /// librdkafka's other names for it), or `nil`.
    package func brokerOwnedProperty(set name: String, to value: String) -> BrokerOwned? {
        brokerOwned.first { owned in
            if owned.property == name { return true }
            let before = KafkaPropertyReading.value(of: owned.property, after: [])
            let after = KafkaPropertyReading.value(of: owned.property, after: [(name, value)])
            return after != nil && after != before
        }
    }

    /// Why `owned` may not be set under this protocol.
    package func refusal(of owned: BrokerOwned) -> String {
        "the consumer group protocol '\(rawValue)' leaves \(owned.property) to the broker, and librdkafka refuses "
            + "it when set at all; set \(owned.instead)"
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
