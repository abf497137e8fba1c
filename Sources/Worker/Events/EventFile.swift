import APNs
import Foundation
import JSONSchema

/// `apns-worker send --event FILE`: one notification event from a JSON file, decoded and checked
/// exactly as the worker does it.
package enum EventFile {
    package struct Problem: Error, CustomStringConvertible {
        package let description: String
        /// The file could not be read (a usage error), as opposed to an event its rules refuse.
        package var unreadable = false
    }

    /// `apns-worker send`'s flags as a notification event (`id`, `deviceToken`, `topic`, `pushType`,
    /// `payload`, … as members; `payload` as JSON text), decoded and checked exactly as the worker
    /// checks events: a background push with an alert, a priority its push type forbids, are refused
    /// here as they would be from Kafka.
    package static func notification(flags: [String: String?]) throws(Problem) -> NotificationEvent {
        var members: [(String, JSONValue)] = []
        for (name, text) in flags.sorted(by: { $0.key < $1.key }) {
            guard let text else { continue }
            switch name {
            case "payload":
                do {
                    members.append((name, try JSONParser.parse(text)))
                } catch {
                    throw Problem(description: "--payload: \(error)")
                }
            case "priority", "expiration":
                guard let number = Int64(text) else { throw Problem(description: "--\(name): not an integer: \(text)") }
                members.append((name, .number(JSONNumber(int64: number))))
            default:
                members.append((name, .string(text)))
            }
        }
        do {
            return try NotificationEventDecoder.standard.decode(JSONValue.object(JSONObject(members)).serialized())
        } catch {
            throw Problem(description: error.problems.map(\.description).joined(separator: "\n"))
        }
    }

    package static func notification(at path: String) throws(Problem) -> NotificationEvent {
        let data: [UInt8]
        do {
            data = try readWholeFile(path)
        } catch {
            throw Problem(description: "\(path): cannot read the file: \(error.reason)", unreadable: true)
        }
        do {
            return try NotificationEventDecoder.standard.decode(data)
        } catch {
            throw Problem(description: error.problems.map { "\(path): \($0)" }.joined(separator: "\n"))
        }
    }
}
