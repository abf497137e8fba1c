/// The `format` values checked when format assertion is turned on (it is off by default, as
/// draft-07 makes it an annotation). Unknown formats are ignored, as the specification says.
package enum Format: String, Sendable, CaseIterable {
    case dateTime = "date-time"
    case date
    case time
    case email
    case idnEmail = "idn-email"
    case hostname
    case ipv4
    case ipv6
    case uri
    case uriReference = "uri-reference"
    case iri
    case iriReference = "iri-reference"
    case uriTemplate = "uri-template"
    case uuid
    case regex
    case jsonPointer = "json-pointer"
    case relativeJSONPointer = "relative-json-pointer"

    package func accepts(_ s: String) -> Bool {
        switch self {
        case .dateTime: return FormatCheck.dateTime(s)
        case .date: return FormatCheck.date(Array(s.utf8)[...])
        case .time: return FormatCheck.time(Array(s.utf8)[...])
        case .email: return FormatCheck.email(s, international: false)
        case .idnEmail: return FormatCheck.email(s, international: true)
        case .hostname: return FormatCheck.hostname(s)
        case .ipv4: return FormatCheck.ipv4(Substring(s))
        case .ipv6: return FormatCheck.ipv6(s)
        case .uri: return FormatCheck.uri(s, requireScheme: true, international: false)
        case .uriReference: return FormatCheck.uri(s, requireScheme: false, international: false)
        case .iri: return FormatCheck.uri(s, requireScheme: true, international: true)
        case .iriReference: return FormatCheck.uri(s, requireScheme: false, international: true)
        case .uriTemplate: return FormatCheck.uriTemplate(s)
        case .uuid: return FormatCheck.uuid(s)
        case .regex: return Pattern.isECMAScript(s)
        case .jsonPointer: return JSONPointer.tokens(s) != nil
        case .relativeJSONPointer: return FormatCheck.relativeJSONPointer(s)
        }
    }
}
