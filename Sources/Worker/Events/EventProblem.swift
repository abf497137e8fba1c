import APNs
import JSONSchema

/// One reason an event cannot be sent, located in the event.
package struct EventProblem: Sendable, Equatable, CustomStringConvertible {
    package enum Kind: String, Sendable, Equatable {
        /// Not JSON: bad syntax, invalid UTF-8, nesting too deep. `instanceLocation` is "".
        case malformedJSON = "malformed-json"
        /// Fails the schema.
        case schema
        /// Passes the schema but breaks an APNs rule checked in code (payload bytes, collapse id bytes…).
        case rule
    }

    package let kind: Kind
    /// JSON pointer into the event ("" for the whole event).
    package let instanceLocation: String
    /// The schema keyword that failed (`required`, `pattern`…), `json` for malformed input, or for a
    /// rule the APNs model's code (`payloadTooLarge`, `badCollapseId`…).
    package let keyword: String
    /// For schema problems: where in the schema (`…#/properties/priority/enum`).
    package let schemaLocation: String?
    package let message: String
    /// For malformed JSON: 1-based line and column inside the event's text.
    package let line: Int?
    package let column: Int?

    package init(
        kind: Kind, instanceLocation: String, keyword: String, schemaLocation: String? = nil, message: String,
        line: Int? = nil, column: Int? = nil
    ) {
        self.kind = kind
        self.instanceLocation = instanceLocation
        self.keyword = keyword
        self.schemaLocation = schemaLocation
        self.message = message
        self.line = line
        self.column = column
    }

    init(_ error: ValidationError) {
        self.init(
            kind: .schema, instanceLocation: error.instanceLocation, keyword: error.keyword,
            schemaLocation: error.schemaLocation,
            message: Self.withoutDeviceToken(SchemaMessages.message(for: error), at: error.instanceLocation))
    }

    /// Where the event's device token is: a message about it never quotes it (results, dead-letter
    /// headers and logs must not carry a token whole, nor its first 40 characters).
    static let deviceTokenLocation = "/deviceToken"

    static func withoutDeviceToken(_ message: String, at location: String) -> String {
        guard location == deviceTokenLocation, message.hasPrefix("'"),
            let match = message.range(of: "' does not match", options: .backwards)
        else { return message }
        return "the device token (not shown)" + message[message.index(after: match.lowerBound)...]
    }

    init(_ error: JSONParseError) {
        self.init(
            kind: .malformedJSON, instanceLocation: "", keyword: "json",
            message: "invalid JSON at line \(error.line), column \(error.column): \(error.message)",
            line: error.line, column: error.column)
    }

    init(_ error: APNsNotificationError) {
        self.init(
            kind: .rule, instanceLocation: Self.pointer(for: error.field), keyword: error.code.rawValue,
            message: error.message)
    }

    /// Where each part of the APNs notification comes from in the event.
    package static func pointer(for field: APNsNotificationError.Field) -> String {
        switch field {
        case .deviceToken: "/deviceToken"
        case .topic: "/topic"
        case .pushType: "/pushType"
        case .priority: "/priority"
        case .expiration: "/expiration"
        case .collapseID: "/collapseId"
        case .apnsID: "/id"
        case .payload: "/payload"
        case .channelID: "/channelId"
        }
    }

    /// `/payload/aps: required property 'alert' is missing`.
    package var description: String {
        "\(instanceLocation.isEmpty ? "(root)" : instanceLocation): \(message)"
    }
}

/// An event that cannot be sent: every problem found, plus the id when one could be read (so an
/// `invalid` result event can still be keyed).
package struct EventDecodingError: Error, Sendable, CustomStringConvertible {
    package let eventID: String?
    /// At least one; the first is the one to report when only one fits (a dead-letter header).
    package let problems: [EventProblem]

    /// `malformed-json`, `schema` or `rule`.
    package var kind: EventProblem.Kind { problems[0].kind }

    /// The `dlq-reason` for this event's dead letter.
    package var deadLetterReason: DeadLetterReason {
        switch kind {
        case .malformedJSON: .malformedJSON
        case .schema: .schema
        case .rule: .rule
        }
    }

    /// The result event's `reason`: `malformedJSON`, `schema`, or the APNs rule's code
    /// (`payloadTooLarge`, `badCollapseId`, …); the keyword and pointer are in `detail`.
    package var resultReason: String {
        switch kind {
        case .malformedJSON: "malformedJSON"
        case .schema: "schema"
        case .rule: problems[0].keyword
        }
    }

    /// The `dlq-detail` for this event's dead letter: the first problem, `<pointer>: <message>`.
    package var deadLetterDetail: String { problems[0].description }

    package var description: String { problems.map(\.description).joined(separator: "; ") }
}
