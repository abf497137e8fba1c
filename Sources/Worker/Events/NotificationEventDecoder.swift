import APNs
import Foundation
import JSONSchema

/// Bytes from Kafka → a ``NotificationEvent`` ready to send, or every reason it is not.
///
/// Three stages, each located in the event: JSON syntax (line and column), the notification-event
/// schema (JSON pointer, keyword, schema location), then the APNs rules a schema cannot express,
/// checked by the APNs model (`APNsNotification.validate`), mapped back to the event's pointers.
package struct NotificationEventDecoder: Sendable {
    package let schema: JSONSchema
    package let maxDepth: Int
    /// A device push without a `collapseId` gets one made from its event id
    /// (`APNsDerivedCollapseID`; `apns.collapseIdFromEventId`).
    package var derivesCollapseIDs = false

    /// The decoder for `schemas/notification-event.schema.json`.
    package static let standard = NotificationEventDecoder(schema: EventSchemas.notificationEvent)

    /// A decoder for a schema that extends ours (it must still describe notification events).
    package init(schema: JSONSchema, maxDepth: Int = JSONParser.defaultMaxDepth) {
        self.schema = schema
        self.maxDepth = maxDepth
    }

    /// The event, or an error carrying the first problem (the hot path: stops early).
    package func decode(_ bytes: [UInt8]) throws(EventDecodingError) -> NotificationEvent {
        try decode(bytes[...], mode: .firstError)
    }

    /// Every problem in the event (empty when it is valid). Schema problems are all reported; the
    /// code-checked rules run only on an event that passed the schema, and report the first broken.
    package func problems(in bytes: ArraySlice<UInt8>) -> [EventProblem] {
        do {
            _ = try decode(bytes, mode: .allErrors)
            return []
        } catch {
            return error.problems
        }
    }

    /// The problems in the order to fix them: a value that is there and wrong before a property
    /// that is missing. A missing property is often what a wrong value asked for: a broadcast
    /// with `"event": "start"` misses `attributes-type` only because starts need it, and what to
    /// fix is the `event` (a broadcast cannot start an activity). Otherwise the schema's order.
    static func fixFirst(_ problems: [EventProblem]) -> [EventProblem] {
        problems.filter { $0.keyword != "required" } + problems.filter { $0.keyword == "required" }
    }

    package func decode(_ bytes: ArraySlice<UInt8>, mode: ValidationMode) throws(EventDecodingError)
        -> NotificationEvent
    {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes, maxDepth: maxDepth)
        } catch {
            throw EventDecodingError(eventID: nil, problems: [EventProblem(error)])
        }
        var errors = schema.validate(value, mode: mode)
        let eventID = value["id"]?.stringValue
        // An invalid event (rare) is checked again for all its problems, so that the one reported
        // first is the one to fix first, not the first the schema happened to meet.
        if !errors.isEmpty, mode == .firstError { errors = schema.validate(value, mode: .allErrors) }
        guard errors.isEmpty else {
            throw EventDecodingError(eventID: eventID, problems: Self.fixFirst(errors.map(EventProblem.init)))
        }
        do {
            return try Self.event(from: value, derivingCollapseID: derivesCollapseIDs)
        } catch {
            throw EventDecodingError(eventID: eventID, problems: [error])
        }
    }

    /// Builds the APNs notification from a schema-valid event and applies the APNs rules.
    static func event(from value: JSONValue, derivingCollapseID: Bool = false) throws(EventProblem) -> NotificationEvent
    {
        func missing(_ pointer: String, _ what: String) -> EventProblem {
            EventProblem(kind: .rule, instanceLocation: pointer, keyword: "required", message: what)
        }
        guard let id = value["id"]?.stringValue else { throw missing("", "an event needs a string 'id'") }
        let channelID = value["channelId"]?.stringValue
        let token = value["deviceToken"]?.stringValue
        guard (token == nil) != (channelID == nil) else {
            throw missing("", "an event needs a string 'deviceToken' or a string 'channelId', not both")
        }
        guard let topic = value["topic"]?.stringValue else { throw missing("", "an event needs a string 'topic'") }
        guard let typeName = value["pushType"]?.stringValue, let pushType = APNsPushType(rawValue: typeName) else {
            throw missing("/pushType", "an event needs a known 'pushType'")
        }
        guard case .object(let payloadObject)? = value["payload"] else {
            throw missing("/payload", "an event needs an object 'payload'")
        }
        var environment = APNsEnvironment.production
        if let name = value["environment"]?.stringValue {
            guard let env = APNsEnvironment(rawValue: name) else {
                throw missing("/environment", "environment must be 'production' or 'development'")
            }
            environment = env
        }
        var priority: APNsPriority?
        if let p = value["priority"] {
            guard let raw = p.numberValue?.intValue, let known = APNsPriority(rawValue: raw) else {
                throw missing("/priority", "priority must be 10, 5 or 1")
            }
            priority = known
        }
        var expiration: APNsExpiration?
        if let e = value["expiration"] {
            guard let seconds = e.numberValue?.int64Value else {
                throw missing("/expiration", "expiration must be an integer number of seconds")
            }
            expiration = APNsExpiration(secondsSince1970: seconds)
        }
        let collapseID = value["collapseId"]?.stringValue
        let payload = JSONValue.object(payloadObject).serialized()
        guard let token else {
            return try broadcast(
                id: id, channelID: channelID ?? "", bundleID: topic, pushType: pushType, priority: priority,
                expiration: expiration, collapseID: collapseID, payload: payload, environment: environment,
                metadata: value["metadata"])
        }
        do {
            let notification = APNsNotification(
                deviceToken: try APNsDeviceToken(token),
                topic: topic,
                pushType: pushType,
                priority: priority,
                expiration: expiration,
                collapseID: collapseID ?? (derivingCollapseID ? APNsDerivedCollapseID.fromEventID(id) : nil),
                apnsID: APNsNotificationID.derived(fromEventID: id),
                payload: payload)
            // The payload bytes come from a parsed object: no need to parse them again.
            try notification.validate(checkingPayloadSyntax: false)
            return NotificationEvent(
                id: id, environment: environment, push: .notification(notification), metadata: value["metadata"])
        } catch {
            throw EventProblem(error)
        }
    }

    /// A Live Activity broadcast to a channel: the schema has required `priority` and `expiration` and
    /// refused a `collapseId` already; checked again here for decoders with a schema of their own.
    static func broadcast(
        id: String, channelID: String, bundleID: String, pushType: APNsPushType, priority: APNsPriority?,
        expiration: APNsExpiration?, collapseID: String?, payload: [UInt8], environment: APNsEnvironment,
        metadata: JSONValue?
    ) throws(EventProblem) -> NotificationEvent {
        func rule(_ pointer: String, _ keyword: String, _ what: String) -> EventProblem {
            EventProblem(kind: .rule, instanceLocation: pointer, keyword: keyword, message: what)
        }
        guard pushType == .liveactivity else {
            throw rule(
                "/pushType", "const", "a broadcast to a channel is a Live Activity push: pushType 'liveactivity'")
        }
        guard let priority else { throw rule("", "required", "a broadcast needs 'priority' (10 or 5)") }
        guard let expiration else {
            throw rule("", "required", "a broadcast needs 'expiration' (a UNIX time, or 0 to send once)")
        }
        if collapseID != nil { throw rule("/collapseId", "not", "a broadcast has no collapse id") }
        let requestID = APNsNotificationID.derived(fromEventID: id).flatMap { UUID(uuidString: $0.uuidString) }
        let broadcast = APNsBroadcast(
            bundleID: bundleID, channelID: channelID, priority: priority, expiration: expiration.secondsSince1970,
            requestID: requestID, payload: payload)
        do {
            try broadcast.validate()
        } catch {
            throw EventProblem(error)
        }
        return NotificationEvent(id: id, environment: environment, push: .broadcast(broadcast), metadata: metadata)
    }
}

extension EventProblem: Error {}
