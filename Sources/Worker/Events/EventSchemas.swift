import JSONSchema

/// The event schemas of schemas/, embedded (their text: `notificationEventText`, `resultEventText`)
/// and compiled once per process.
public enum EventSchemas {
    /// `notification-event.schema.json`, compiled. Its validity is a build property (tested), so a
    /// failure here is a defect, not an input error.
    public static let notificationEvent: JSONSchema = compile(notificationEventText)

    /// `result-event.schema.json`, compiled (format assertion on: `completedAt` is a date-time).
    public static let resultEvent: JSONSchema = compile(resultEventText, formatAssertion: true)

    static func compile(_ text: String, formatAssertion: Bool = false) -> JSONSchema {
        do {
            return try JSONSchema(text: text, options: .init(formatAssertion: formatAssertion))
        } catch {
            fatalError("embedded schema does not compile: \(error)")
        }
    }
}
