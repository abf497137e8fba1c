import APNs
import Foundation
import JSONSchema
import Testing
import Worker

/// Builds events from a valid base, changed one field at a time, so each test breaks one rule.
enum EventFixtures {
    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func schemaFile(_ name: String) -> URL {
        repositoryRoot.appendingPathComponent("schemas").appendingPathComponent(name)
    }

    static let token = "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"

    static let alert: JSONValue = [
        "id": "5B0E9A4C-7F2D-4C1E-9A57-0D6C1F4E8B21",
        "deviceToken": .string(token),
        "environment": "production",
        "topic": "com.example.app",
        "pushType": "alert",
        "priority": 10,
        "expiration": 1_767_225_600,
        "collapseId": "order-1234",
        "payload": ["aps": ["alert": ["title": "Shipped", "body": "Your order is on its way."], "badge": 1]],
        "metadata": ["tenant": "acme", "trace": [1, 2, 3]],
    ]

    /// A Live Activity update broadcast to a channel.
    static let broadcast: JSONValue = [
        "id": "0F1E2D3C-4B5A-4978-8695-A4B3C2D1E0F9",
        "channelId": "dHN/RUmHFYk9eY+fXzUrJA==",
        "environment": "production",
        "topic": "com.example.app",
        "pushType": "liveactivity",
        "priority": 10,
        "expiration": 0,
        "payload": [
            "aps": [
                "timestamp": 1_767_225_600, "event": "update",
                "content-state": ["home": 2, "away": 1, "minute": 63],
            ]
        ],
        "metadata": ["match": "m-17"],
    ]

    /// `base` with members set (or removed, for `nil`).
    static func event(_ changes: [String: JSONValue?], base: JSONValue = alert) -> [UInt8] {
        guard case .object(var o) = base else { fatalError("base must be an object") }
        for (key, value) in changes { o[key] = value }
        return JSONValue.object(o).serialized()
    }

    /// A payload whose compact serialization is exactly `bytes` long.
    static func payload(bytes: Int) -> JSONValue {
        // {"aps":{"alert":"…"}} is 20 bytes around the text.
        ["aps": ["alert": .string(String(repeating: "x", count: bytes - 20))]]
    }
}

extension NotificationEvent {
    /// The notification of an event that targets one device; a test failure when it targets a channel.
    var deviceNotification: APNsNotification {
        get throws { try #require(notification, "the event targets a channel, not one device") }
    }
}
