/// One reason an instance does not match a schema.
package struct ValidationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// JSON pointer into the instance ("" is the whole document).
    package let instanceLocation: String
    /// URI of the failing keyword in the schema: the schema's base URI plus a JSON-pointer fragment,
    /// e.g. `#/properties/priority/enum`.
    package let schemaLocation: String
    /// The keyword that failed, e.g. `required`.
    package let keyword: String
    /// A sentence for a person: "required property 'alert' is missing".
    package let message: String

    package init(instanceLocation: String, schemaLocation: String, keyword: String, message: String) {
        self.instanceLocation = instanceLocation
        self.schemaLocation = schemaLocation
        self.keyword = keyword
        self.message = message
    }

    /// `/payload/aps: required property 'alert' is missing`; the document itself shows as `(root)`.
    package var description: String {
        "\(instanceLocation.isEmpty ? "(root)" : instanceLocation): \(message)"
    }
}

/// A path token collected while unwinding from a failure, so the success path builds no strings.
enum PathToken: Sendable {
    case key(String)
    case index(Int)
}

/// An error whose instance path is still being collected, innermost token first.
struct PendingError {
    var reversedPath: [PathToken] = []
    let schemaLocation: String
    let keyword: String
    let message: String

    func finished() -> ValidationError {
        var pointer = ""
        for token in reversedPath.reversed() {
            switch token {
            case .key(let k): pointer += "/" + JSONPointer.escape(k)
            case .index(let i): pointer += "/" + String(i)
            }
        }
        return ValidationError(
            instanceLocation: pointer, schemaLocation: schemaLocation, keyword: keyword, message: message)
    }
}
