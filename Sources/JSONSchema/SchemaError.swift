/// A schema that cannot be compiled: not a schema, a keyword with a wrong value, a `$ref` that does
/// not resolve, a reference cycle that would never consume input. Says where, when it knows.
package struct SchemaError: Error, Sendable, Equatable, CustomStringConvertible {
    package var message: String
    /// The schema location (URI with a JSON-pointer fragment) of the offending keyword, if known.
    package var location: String?

    package init(_ message: String, at location: String? = nil) {
        self.message = message
        self.location = location
    }

    package var description: String {
        if let location { return "\(location): \(message)" }
        return message
    }
}
