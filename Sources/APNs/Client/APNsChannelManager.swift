import Foundation
import Logging
import NIOCore

/// Apple's broadcast channel management (iOS 18 Live Activities over channels): create, read,
/// delete and list the channels of an app, on `api-manage-broadcast[.sandbox].push.apple.com`
/// (ports 2196 and 2195), over HTTP/2 with token or certificate authentication, through the same
/// connection machinery as notifications (proxy, TLS verification, reconnects). A bundle id that is
/// not one (anything but letters, digits, `.` and `-`) is refused with `APNsNotificationError`
/// before a request is made.
public final class APNsChannelManager: Sendable {
    /// How a channel keeps messages for devices that are offline.
    public enum StoragePolicy: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// Nothing is stored: broadcasts must carry `apns-expiration: 0`.
        case noMessageStored = 0
        /// The most recent message is stored (up to 8 hours).
        case mostRecentMessageStored = 1

        public var description: String {
            switch self {
            case .noMessageStored: "no message stored"
            case .mostRecentMessageStored: "most recent message stored"
            }
        }
    }

    /// A channel as channel management describes it.
    public struct Channel: Sendable, Hashable {
        public var id: String
        public var storagePolicy: StoragePolicy?
        /// `LiveActivity` (the only type Apple has).
        public var pushType: String?

        public init(id: String, storagePolicy: StoragePolicy?, pushType: String?) {
            self.id = id
            self.storagePolicy = storagePolicy
            self.pushType = pushType
        }
    }

    /// An answer other than success: the status, Apple's reason and the request's id.
    public struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        public var status: Int
        public var reason: APNsReason?
        public var requestID: String?
        public var description: String {
            "APNs answered \(status) \(reason?.rawValue ?? "")" + (requestID.map { " (apns-request-id \($0))" } ?? "")
        }
    }

    /// Apple's channel-management host for `environment`.
    public static func host(for environment: APNsEnvironment) -> String {
        environment == .production
            ? "api-manage-broadcast.push.apple.com" : "api-manage-broadcast.sandbox.push.apple.com"
    }

    /// Apple's channel-management port for `environment`.
    public static func port(for environment: APNsEnvironment) -> Int {
        environment == .production ? 2196 : 2195
    }

    private let client: APNsClient

    /// - Parameter configuration: its `host` and `port` are overridden by Apple's channel-management
    ///   host and port unless `host` is set (the simulator, a test server).
    public init(
        configuration: APNsClientConfiguration, credential: APNsCredential,
        eventLoopGroup: (any EventLoopGroup)? = nil, logger: Logger = Logger(label: "apns.channels")
    ) throws {
        var configuration = configuration
        if configuration.host == nil {
            configuration.host = Self.host(for: configuration.environment)
            configuration.port = Self.port(for: configuration.environment)
        }
        configuration.connectionsPerCredential = 1
        client = try APNsClient(
            configuration: configuration, credential: credential, eventLoopGroup: eventLoopGroup, logger: logger)
    }

    /// Creates a channel; APNs chooses its id.
    public func create(bundleID: String, storagePolicy: StoragePolicy, requestID: UUID? = nil) async throws -> Channel {
        let body = #"{"message-storage-policy":\#(storagePolicy.rawValue),"push-type":"LiveActivity"}"#
        let response = try await call(
            "POST", "/1/apps/\(bundleID)/channels", bundleID, requestID, body: Array(body.utf8))
        guard let id = response.channelID, !id.isEmpty else {
            throw Failure(status: response.status, reason: nil, requestID: response.requestID)
        }
        return Channel(id: id, storagePolicy: storagePolicy, pushType: "LiveActivity")
    }

    /// A channel's settings.
    public func read(bundleID: String, channelID: String, requestID: UUID? = nil) async throws -> Channel {
        let response = try await call(
            "GET", "/1/apps/\(bundleID)/channels", bundleID, requestID, headers: [("apns-channel-id", channelID)])
        let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        return Channel(
            id: channelID,
            storagePolicy: (object?["message-storage-policy"] as? Int).flatMap(StoragePolicy.init(rawValue:)),
            pushType: object?["push-type"] as? String)
    }

    /// Deletes a channel (its id never comes back).
    public func delete(bundleID: String, channelID: String, requestID: UUID? = nil) async throws {
        _ = try await call(
            "DELETE", "/1/apps/\(bundleID)/channels", bundleID, requestID, headers: [("apns-channel-id", channelID)])
    }

    /// The ids of every channel of the app in this environment.
    public func list(bundleID: String, requestID: UUID? = nil) async throws -> [String] {
        let response = try await call("GET", "/1/apps/\(bundleID)/all-channels", bundleID, requestID)
        let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        return object?["channels"] as? [String] ?? []
    }

    public func shutdown() async {
        await client.shutdown()
    }

    private func call(
        _ method: String, _ path: String, _ bundleID: String, _ requestID: UUID?,
        headers: [(name: String, value: String)] = [], body: [UInt8] = []
    ) async throws -> APNsResponse {
        // The bundle id is part of the path: refused here, before it can point the request elsewhere.
        try APNsBroadcast.validateBundleID(bundleID)
        var headers = headers
        if let requestID { headers.append(("apns-request-id", requestID.uuidString.lowercased())) }
        if !body.isEmpty { headers.append(("content-type", "application/json")) }
        let response = try await client.send(
            custom: APNsCustomRequest(method: method, path: path, headers: headers, body: body))
        guard (200..<300).contains(response.status) else {
            throw Failure(
                status: response.status, reason: APNsResponse.parseBody(response.body).reason,
                requestID: response.requestID)
        }
        return response
    }
}
