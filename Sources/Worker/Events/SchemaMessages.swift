import JSONSchema

/// Messages for people where the notification-event schema can say more than a generic validator:
/// a rule's own `description` (written as the sentence to show), and the `anyOf`/`not` of required
/// members spelt out ("needs one of 'alert', 'sound', 'badge'") instead of "matches none of 3".
enum SchemaMessages {
    static let base = "urn:apns-worker:schema:notification-event#"
    static let tree: JSONValue? = try? JSONParser.parse(EventSchemas.notificationEventText)

    /// The message for `error`, refined when it points into the notification-event schema.
    static func message(for error: ValidationError) -> String {
        guard error.schemaLocation.hasPrefix(base), let tree,
            var tokens = JSONPointer.tokens(String(error.schemaLocation.dropFirst(base.count))), !tokens.isEmpty
        else { return error.message }
        tokens.removeLast()  // the keyword: what remains is the schema that holds it
        guard case .object(let node)? = JSONPointer.resolve(JSONPointer.from(tokens), in: tree) else {
            return error.message
        }
        // The rules (allOf's conditionals) carry descriptions written as messages; a property's own
        // description says what it is, not what went wrong, so it is not used.
        if tokens.contains("allOf"), case .string(let description)? = node["description"] {
            return description
        }
        switch error.keyword {
        case "anyOf":
            if let names = requiredNames(node["anyOf"]) {
                return "needs one of \(list(names)): required property '\(names[0])' is missing"
            }
        case "not":
            if case .object(let inner)? = node["not"], let names = requiredNames(inner["anyOf"]) {
                return "must not have \(list(names))"
            }
        default:
            break
        }
        return error.message
    }

    /// `["alert", "sound", "badge"]` when `value` is a list of `{"required": [name]}` schemas.
    private static func requiredNames(_ value: JSONValue?) -> [String]? {
        guard case .array(let branches)? = value, !branches.isEmpty else { return nil }
        var names: [String] = []
        for branch in branches {
            guard case .object(let object) = branch, object.count == 1,
                case .array(let required)? = object["required"], required.count == 1,
                case .string(let name) = required[0]
            else { return nil }
            names.append(name)
        }
        return names
    }

    private static func list(_ names: [String]) -> String {
        names.map { "'\($0)'" }.joined(separator: ", ")
    }
}
