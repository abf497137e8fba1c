import JSONSchema
import Worker

/// The JSON parser and the schema validator: any bytes; those that parse are written back (which must
/// parse to the same value) and validated against the worker's event schemas in every mode (which must
/// agree on the verdict).
package enum FuzzJSON {
    /// Compiles the schemas before the first input, so that no input pays for it.
    package static func prepare() {
        _ = EventSchemas.notificationEvent
        _ = EventSchemas.resultEvent
    }

    package static func run(_ data: UnsafeBufferPointer<UInt8>) {
        let value: JSONValue
        do {
            value = try JSONParser.parse(data)
        } catch {
            _ = error.description
            return
        }
        let text = value.serialized()
        guard let again = try? JSONParser.parse(text) else {
            fuzzCheck(false, "the serialized form does not parse: \(String(decoding: text, as: UTF8.self))")
            return
        }
        fuzzCheck(
            again == value, "the serialized form parses to another value: \(String(decoding: text, as: UTF8.self))")
        fuzzCheck(again.serialized() == text, "serializing is not stable: \(String(decoding: text, as: UTF8.self))")

        for schema in [EventSchemas.notificationEvent, EventSchemas.resultEvent] {
            let first = schema.validate(value, mode: .firstError)
            let all = schema.validate(value, mode: .allErrors)
            let valid = schema.isValid(value)
            fuzzCheck(first.count <= 1, "firstError mode returned \(first.count) errors")
            fuzzCheck(
                valid == first.isEmpty && valid == all.isEmpty,
                "modes disagree (isValid \(valid), firstError \(first.count), allErrors \(all.count)) on "
                    + String(decoding: text, as: UTF8.self))
            for error in all { _ = "\(error)" }
        }
    }
}
