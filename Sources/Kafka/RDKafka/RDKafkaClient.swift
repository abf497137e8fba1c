internal import CRdKafka
import Logging
import Threading

/// What a handle reports back. librdkafka receives this object as the handle's opaque, *unretained*:
/// the `RDKafkaClient` that owns the handle keeps it alive and destroys the handle first.
///
/// `@unchecked Sendable`: every property is a `let` set before the handle exists, and the closures
/// are themselves `@Sendable`; librdkafka calls them from its own threads.
final class RDKafkaCallbacks: @unchecked Sendable {
    typealias Rebalance = @Sendable (RDKafkaRebalance) -> Void

    let logger: Logger
    let rebalance: Rebalance?
    let statistics: (@Sendable (String) -> Void)?
    let error: (@Sendable (KafkaError) -> Void)?
    /// Every response the client receives from a broker: its API key and error code (an
    /// interceptor, on librdkafka's broker threads). For probes: librdkafka has no call that says
    /// which APIs a broker supports, but a response to one says it was sent and answered.
    let responses: (@Sendable (_ apiKey: Int16, _ error: KafkaError.Code) -> Void)?
    let deliveryReports: Bool
    /// Where the delivery reports' contexts were put (a producer's).
    let homes = HomeRelease.Homes()

    init(
        logger: Logger, rebalance: Rebalance? = nil, statistics: (@Sendable (String) -> Void)? = nil,
        error: (@Sendable (KafkaError) -> Void)? = nil,
        responses: (@Sendable (_ apiKey: Int16, _ error: KafkaError.Code) -> Void)? = nil, deliveryReports: Bool = false
    ) {
        self.logger = logger
        self.rebalance = rebalance
        self.statistics = statistics
        self.error = error
        self.responses = responses
        self.deliveryReports = deliveryReports
    }

    static func from(_ handle: OpaquePointer?) -> RDKafkaCallbacks? {
        guard let handle, let opaque = rd_kafka_opaque(handle) else { return nil }
        return Unmanaged<RDKafkaCallbacks>.fromOpaque(opaque).takeUnretainedValue()
    }
}

/// One `rd_kafka_t` handle; `deinit` destroys it.
///
/// `@unchecked Sendable`: librdkafka's handle is thread-safe for every call this module makes on it;
/// the pointer itself never changes. `heldTopics` is behind its lock.
final class RDKafkaClient: @unchecked Sendable {
    let handle: OpaquePointer
    let callbacks: RDKafkaCallbacks
    /// Topic handles kept until the client goes (`holdTopics`).
    private let heldTopics = Locked<[String: OpaquePointer]>([:])

    enum Kind {
        case consumer
        case producer
    }

    init(_ kind: Kind, config: RDKafkaConfig, callbacks: RDKafkaCallbacks) throws(KafkaError) {
        let type = kind == .consumer ? RD_KAFKA_CONSUMER : RD_KAFKA_PRODUCER
        let interceptor = config.withPointer { conf -> rd_kafka_resp_err_t in
            rd_kafka_conf_set_opaque(conf, Unmanaged.passUnretained(callbacks).toOpaque())
            rd_kafka_conf_set_log_cb(conf, rdkafkaLog)
            rd_kafka_conf_set_error_cb(conf, rdkafkaError)
            if callbacks.rebalance != nil { rd_kafka_conf_set_rebalance_cb(conf, rdkafkaRebalance) }
            if callbacks.statistics != nil { rd_kafka_conf_set_stats_cb(conf, rdkafkaStatistics) }
            if callbacks.deliveryReports { rd_kafka_conf_set_dr_msg_cb(conf, rdkafkaDeliveryReport) }
            guard callbacks.responses != nil else { return RD_KAFKA_RESP_ERR_NO_ERROR }
            return rd_kafka_conf_interceptor_add_on_new(conf, "apns-worker-responses", rdkafkaInterceptorsOnNew, nil)
        }
        // Without it the responses would never come, and a probe would read that as an answer.
        guard interceptor == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(interceptor, "the response interceptor could not be added")
        }
        var errstr = [CChar](repeating: 0, count: 512)
        let conf = config.release()
        guard let handle = rd_kafka_new(type, conf, &errstr, errstr.count) else {
            rd_kafka_conf_destroy(conf)  // not taken over on failure
            throw KafkaError(code: .invalidArgument, message: String(errorBuffer: errstr))
        }
        self.handle = handle
        self.callbacks = callbacks
    }

    deinit {
        for topic in heldTopics.withLock({ $0.values }) { rd_kafka_topic_destroy(topic) }
        rd_kafka_destroy(handle)
    }

    /// Creates a handle for each topic and keeps it until the client goes: librdkafka then asks for
    /// the topic's partitions and leaders at once and keeps them current, instead of when the first
    /// record for it is produced.
    func holdTopics(_ topics: [String]) {
        heldTopics.withLock { held in
            for topic in topics where held[topic] == nil {
                if let topicHandle = rd_kafka_topic_new(handle, topic, nil) { held[topic] = topicHandle }
            }
        }
    }

    var logger: Logger { callbacks.logger }

    /// The fatal error the handle has raised, if any.
    static func fatalError(of handle: OpaquePointer) -> KafkaError? {
        var errstr = [CChar](repeating: 0, count: 512)
        let err = rd_kafka_fatal_error(handle, &errstr, errstr.count)
        guard err != RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        return KafkaError(code: .init(err), message: String(errorBuffer: errstr), isFatal: true)
    }

    /// The consumer calls on this handle.
    var consumer: RDKafkaConsumerHandle { RDKafkaConsumerHandle(pointer: handle) }

    // MARK: producer calls

    /// Waits up to `timeout` for every enqueued record's delivery report.
    func flush(timeout: Duration) -> KafkaError? {
        let err = rd_kafka_flush(handle, Int32(clamping: timeout.milliseconds))
        guard err != RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        return KafkaError(err, "\(outQueueLength) records still unacknowledged")
    }

    /// Records (and requests) enqueued and not yet acknowledged or failed.
    var outQueueLength: Int { Int(rd_kafka_outq_len(handle)) }

    /// Serves delivery reports and other callbacks, waiting up to `milliseconds` for one.
    func poll(milliseconds: Int32) {
        _ = rd_kafka_poll(handle, milliseconds)
    }

    /// Fails every queued and in-flight record (`purged`, `purgedInFlight`).
    func purgeAll() {
        rd_kafka_purge(handle, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
    }

    /// Raises a fatal error as a broker's answer that breaks an idempotent producer's guarantees would.
    func raiseFatalErrorForTesting(_ reason: String) {
        _ = rd_kafka_test_fatal_error(handle, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, reason)
    }
}

// MARK: C callbacks (free functions matching librdkafka's typedefs)

private func rdkafkaLog(
    _ handle: OpaquePointer?, _ level: Int32, _ facility: UnsafePointer<CChar>?,
    _ message: UnsafePointer<CChar>?
) {
    guard let callbacks = RDKafkaCallbacks.from(handle), let message else { return }
    // syslog levels: 0 emerg … 3 err, 4 warning, 5 notice, 6 info, 7 debug.
    let swiftLevel: Logger.Level =
        switch level {
        case ...3: .error
        case 4: .warning
        case 5, 6: .info
        default: .debug
        }
    let facilityText = facility.map { String(cString: $0) } ?? "-"
    let text = String(cString: message)
    // A broker failure ("FAIL"): up to librdkafka 2.9 every one above debug (a refused connection,
    // a broker that closed one, with requests in flight or not) was also raised through the error
    // callback; since 2.10 only those at level error are, the others are only logged. They are
    // raised here as librdkafka's transport errors, as before, so that readiness and check still
    // name them ("Disconnected: connection reset by peer" from a broker that wants TLS or SASL of a
    // client that speaks neither), and logged once, by whoever handles the error callback.
    if facilityText == "FAIL", let raise = callbacks.error {
        // Levels 4 to 6 (warning, notice, info); debug lines (debug=broker) are not failures.
        if (4...6).contains(level) { raise(KafkaError(code: .transport, message: text)) }
        callbacks.logger.log(level: .debug, "\(text)", metadata: ["rdkafka": "\(facilityText)"])
        return
    }
    callbacks.logger.log(level: swiftLevel, "\(text)", metadata: ["rdkafka": "\(facilityText)"])
}

private func rdkafkaError(
    _ handle: OpaquePointer?, _ code: Int32, _ reason: UnsafePointer<CChar>?,
    _ opaque: UnsafeMutableRawPointer?
) {
    guard let callbacks = RDKafkaCallbacks.from(handle) else { return }
    let err = rd_kafka_resp_err_t(code)
    var error = KafkaError(err, reason.map { String(cString: $0) })
    if err == RD_KAFKA_RESP_ERR__FATAL, let handle, let underlying = RDKafkaClient.fatalError(of: handle) {
        error = underlying
    }
    callbacks.error?(error)
}

/// Called by `rd_kafka_new` once the handle exists (its opaque set): adds the response interceptor.
private func rdkafkaInterceptorsOnNew(
    _ handle: OpaquePointer?, _ conf: OpaquePointer?, _ opaque: UnsafeMutableRawPointer?,
    _ errstr: UnsafeMutablePointer<CChar>?, _ errstrSize: Int
) -> rd_kafka_resp_err_t {
    rd_kafka_interceptor_add_on_response_received(handle, "apns-worker-responses", rdkafkaResponseReceived, nil)
}

private func rdkafkaResponseReceived(
    _ handle: OpaquePointer?, _ socket: Int32, _ brokerName: UnsafePointer<CChar>?, _ brokerID: Int32,
    _ apiKey: Int16, _ apiVersion: Int16, _ correlationID: Int32, _ size: Int, _ rtt: Int64,
    _ err: rd_kafka_resp_err_t, _ opaque: UnsafeMutableRawPointer?
) -> rd_kafka_resp_err_t {
    RDKafkaCallbacks.from(handle)?.responses?(apiKey, KafkaError.Code(err))
    return RD_KAFKA_RESP_ERR_NO_ERROR
}

private func rdkafkaRebalance(
    _ handle: OpaquePointer?, _ event: rd_kafka_resp_err_t,
    _ partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
    _ opaque: UnsafeMutableRawPointer?
) {
    guard let handle, let partitions, let callbacks = RDKafkaCallbacks.from(handle),
        let rebalance = callbacks.rebalance
    else { return }
    rebalance(RDKafkaRebalance(handle: handle, event: event, list: partitions))
}

private func rdkafkaStatistics(
    _ handle: OpaquePointer?, _ json: UnsafeMutablePointer<CChar>?, _ length: Int,
    _ opaque: UnsafeMutableRawPointer?
) -> Int32 {
    if let callbacks = RDKafkaCallbacks.from(handle), let json {
        let text = String(decoding: UnsafeRawBufferPointer(start: json, count: length), as: UTF8.self)
        callbacks.statistics?(text)
    }
    return 0  // librdkafka frees the JSON
}

private func rdkafkaDeliveryReport(
    _ handle: OpaquePointer?, _ message: UnsafePointer<rd_kafka_message_t>?,
    _ opaque: UnsafeMutableRawPointer?
) {
    guard let message, let context = message.pointee._private else { return }
    // Retained when the record was enqueued (KafkaProducer.enqueue). Its one release is made by the
    // thread that sent it, out of that thread's bin (HomeRelease), once the completion has run.
    let delivery = Unmanaged<DeliveryContext>.fromOpaque(context).takeUnretainedValue()
    defer {
        RDKafkaCallbacks.from(handle)?.homes.note(delivery.home)
        delivery.home.put(Unmanaged.passUnretained(delivery as AnyObject))
    }
    let record = message.pointee
    if record.err == RD_KAFKA_RESP_ERR_NO_ERROR {
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let timestamp = rd_kafka_message_timestamp(message, &timestampType)
        delivery.complete(
            .success(
                KafkaDeliveryReport(
                    topic: delivery.topic, partition: record.partition,
                    offset: record.offset, timestampMilliseconds: timestamp >= 0 ? timestamp : nil)))
    } else {
        delivery.complete(.failure(KafkaError(record.err)))
    }
}

/// One produced record's completion, carried through librdkafka as the record's opaque.
final class DeliveryContext {
    /// The record's topic, for its report: the message's own string, so a report makes no new one
    /// (librdkafka's topic name would be copied into a `String` for every record).
    let topic: String
    let complete: @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void
    /// The sending thread's bin: released there, where it was allocated (HomeRelease).
    let home: HomeRelease.Bin
    init(
        topic: String, home: HomeRelease.Bin,
        _ complete: @escaping @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void
    ) {
        self.topic = topic
        self.home = home
        self.complete = complete
    }
}
