import APNs
import Foundation

/// `apns-worker send --event FILE`: one notification event from a JSON file, decoded and checked
/// exactly as the worker does it.
public enum EventFile {
    public struct Problem: Error, CustomStringConvertible {
        public let description: String
    }

    public static func notification(at path: String) throws(Problem) -> NotificationEvent {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Problem(description: "\(path): cannot read the file")
        }
        do {
            return try NotificationEventDecoder.standard.decode(Array(data))
        } catch {
            throw Problem(description: error.problems.map { "\(path): \($0)" }.joined(separator: "\n"))
        }
    }
}
