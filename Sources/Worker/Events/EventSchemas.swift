import JSONSchema

/// The event schemas of schemas/, embedded in the binary at build time (SwiftPM's `embedInCode`
/// resources; `Sources/Worker/Schemas/` links to the files) and compiled once per process.
package enum EventSchemas {
    /// schemas/notification-event.schema.json, as the binary carries it.
    package static let notificationEventText = String(
        decoding: PackageResources.notification_event_schema_json, as: UTF8.self)

    /// schemas/result-event.schema.json, as the binary carries it.
    package static let resultEventText = String(decoding: PackageResources.result_event_schema_json, as: UTF8.self)

    /// `notification-event.schema.json`, compiled. Its validity is a build property (tested), so a
    /// failure here is a defect, not an input error.
    package static let notificationEvent: JSONSchema = compile(notificationEventText)

    /// `result-event.schema.json`, compiled (format assertion on: `completedAt` is a date-time).
    package static let resultEvent: JSONSchema = compile(resultEventText, formatAssertion: true)

    static func compile(_ text: String, formatAssertion: Bool = false) -> JSONSchema {
        do {
            return try JSONSchema(text: text, options: .init(formatAssertion: formatAssertion))
        } catch {
            fatalError("embedded schema does not compile: \(error)")
        }
    }
}
