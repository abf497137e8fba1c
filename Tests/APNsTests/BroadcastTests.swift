import APNsSimulator
import Foundation
import Testing

@testable import APNs

/// Broadcasts and channel management against the APNs simulator, whose broadcast endpoint and
/// channel-management listener follow Apple's documents (docs/simulator.md).
@Suite("Broadcasts and channel management against the simulator", .serialized, .timeLimit(.minutes(2)))
struct BroadcastTests {
    static let bundleID = "com.example.app"
    static let liveActivity = Array(
        #"{"aps":{"timestamp":1700000000,"event":"update","content-state":{"score":1}}}"#.utf8)

    private func withSimulator(_ body: (Simulator, TestPKI) async throws -> Void) async throws {
        let pki = try TestPKI()
        let simulator = try await Simulator.startForTests(pki: pki) {
            $0.broadcastDisabledBundleIDs = ["com.example.nobroadcast"]
        }
        do {
            try await body(simulator, pki)
            try await simulator.shutdown()
        } catch {
            try? await simulator.shutdown()
            throw error
        }
    }

    private func manager(_ simulator: Simulator, _ pki: TestPKI) throws -> APNsChannelManager {
        let configuration = ClientFixtures.configuration(port: simulator.managementPort, pki: pki)
        return try APNsChannelManager(configuration: configuration, credential: ClientFixtures.tokenCredential(pki))
    }

    @Test("create, read, list and delete a channel; a deleted or unknown one is ChannelNotRegistered")
    func channelLifecycle() async throws {
        try await withSimulator { simulator, pki in
            let manager = try manager(simulator, pki)
            let stored = try await manager.create(bundleID: Self.bundleID, storagePolicy: .mostRecentMessageStored)
            let plain = try await manager.create(bundleID: Self.bundleID, storagePolicy: .noMessageStored)
            #expect(!stored.id.isEmpty && stored.id != plain.id)
            let read = try await manager.read(bundleID: Self.bundleID, channelID: stored.id)
            #expect(read.storagePolicy == .mostRecentMessageStored)
            #expect(read.pushType == "LiveActivity")
            #expect(Set(try await manager.list(bundleID: Self.bundleID)) == [stored.id, plain.id])
            try await manager.delete(bundleID: Self.bundleID, channelID: stored.id)
            #expect(try await manager.list(bundleID: Self.bundleID) == [plain.id])
            let gone = await #expect(throws: APNsChannelManager.Failure.self) {
                try await manager.read(bundleID: Self.bundleID, channelID: stored.id)
            }
            #expect(gone?.status == 400)
            #expect(gone?.reason == .channelNotRegistered)
            #expect(gone?.requestID != nil)
            let disabled = await #expect(throws: APNsChannelManager.Failure.self) {
                try await manager.create(bundleID: "com.example.nobroadcast", storagePolicy: .noMessageStored)
            }
            #expect(disabled?.reason == .featureNotEnabled)
            await manager.shutdown()
        }
    }

    @Test(
        "a broadcast reaches the channel: 200 with apns-request-id (ours) and apns-unique-id; Apple's refusals come back"
    )
    func broadcast() async throws {
        try await withSimulator { simulator, pki in
            let manager = try manager(simulator, pki)
            let channel = try await manager.create(bundleID: Self.bundleID, storagePolicy: .noMessageStored)
            await manager.shutdown()
            let configuration = ClientFixtures.configuration(port: simulator.port, pki: pki)
            try await withClient(configuration, credential: ClientFixtures.tokenCredential(pki)) { client in
                let requestID = UUID()
                let response = try await client.send(
                    APNsBroadcast(
                        bundleID: Self.bundleID, channelID: channel.id, priority: .immediate, expiration: 0,
                        requestID: requestID, payload: Self.liveActivity))
                #expect(response.status == 200)
                #expect(response.requestID == requestID.uuidString.lowercased())
                #expect(response.apnsUniqueID != nil)
                let received = try #require(simulator.observation.broadcasts.first)
                #expect(received.channelID == channel.id)
                #expect(received.payload == Self.liveActivity)
                #expect(received.pushType == "liveactivity" && received.priority == 10 && received.expiration == 0)

                // A stored message on a channel that stores none: BadExpirationDate.
                let stored = try await client.send(
                    APNsBroadcast(
                        bundleID: Self.bundleID, channelID: channel.id, priority: .powerConsidered,
                        expiration: 1_900_000_000, payload: Self.liveActivity))
                #expect(stored.status == 400 && stored.reason == .badExpirationDate)
                let unknown = try await client.send(
                    APNsBroadcast(
                        bundleID: Self.bundleID, channelID: "bm90LWEtY2hhbm5lbA==", priority: .immediate, expiration: 0,
                        payload: Self.liveActivity))
                #expect(unknown.status == 400 && unknown.reason == .channelNotRegistered)
                #expect(APNsOutcome.classify(unknown) == .rejected(.channelNotRegistered))
            }
        }
    }

    @Test("a broadcast that breaks Apple's rules is refused before sending, naming the rule")
    func localRules() throws {
        func broadcast(
            bundleID: String = "com.example.app", channelID: String = "YWJj", priority: APNsPriority = .immediate,
            payload: [UInt8] = BroadcastTests.liveActivity
        ) -> APNsBroadcast {
            APNsBroadcast(
                bundleID: bundleID, channelID: channelID, priority: priority, expiration: 0, payload: payload)
        }
        #expect(throws: Never.self) { try broadcast().validate() }
        #expect(throwing(broadcast(bundleID: "com.example.app.push-type.liveactivity"))?.code == .badTopic)
        #expect(throwing(broadcast(channelID: "not base64!"))?.code == .badChannelID)
        #expect(throwing(broadcast(priority: .lowPower))?.code == .badPriority)
        #expect(throwing(broadcast(payload: Array(repeating: 32, count: 5121)))?.code == .payloadTooLarge)
        #expect(throwing(broadcast(payload: []))?.code == .payloadEmpty)
    }

    // The bundle id becomes part of the request's :path; the schema let any visible ASCII through,
    // so "/", "?" and "#" reached /4/broadcasts/apps/{bundle} (and channel management's paths).
    @Test(
        "a bundle id that would change the request path is refused before anything is sent",
        arguments: [
            "com.example/../../3/device/aa", "com.example.app?x=1", "com.example#app", "com.example_app", "é.app",
        ])
    func bundleIDCharacters(bundleID: String) async throws {
        let refused = try #require(
            throwing(
                APNsBroadcast(
                    bundleID: bundleID, channelID: "YWJj", priority: .immediate, expiration: 0,
                    payload: BroadcastTests.liveActivity)))
        #expect(refused.code == .badTopic)
        #expect(refused.message.contains("letters, digits, '.' and '-'"), "\(refused)")
        try await withSimulator { simulator, pki in
            let manager = try APNsChannelManager(
                configuration: ClientFixtures.configuration(port: simulator.managementPort, pki: pki, connections: 1),
                credential: ClientFixtures.tokenCredential(pki))
            await #expect(throws: APNsNotificationError.self) {
                _ = try await manager.create(bundleID: bundleID, storagePolicy: .noMessageStored)
            }
            await #expect(throws: APNsNotificationError.self) { _ = try await manager.list(bundleID: bundleID) }
            await manager.shutdown()
            #expect(simulator.observation.counters.isEmpty, "the server answered nothing: nothing reached it")
        }
        let plain = APNsBroadcast(
            bundleID: "com.Example-2.app", channelID: "YWJj", priority: .immediate, expiration: 0,
            payload: BroadcastTests.liveActivity)
        #expect(throwing(plain) == nil, "letters, digits, '.' and '-' pass")
    }

    private func throwing(_ broadcast: APNsBroadcast) -> APNsNotificationError? {
        do {
            try broadcast.validate()
            return nil
        } catch {
            return error
        }
    }

    @Test("403 UnrelatedKeyIdInToken: the answer is a retry, and the connection is retired for a new one")
    func unrelatedKeyRetiresTheConnection() async throws {
        try await withSimulator { simulator, pki in
            var configuration = ClientFixtures.configuration(port: simulator.port, pki: pki, connections: 1)
            configuration.reconnectBase = .milliseconds(10)
            simulator.faults.script(deviceToken: "aabbccdd", [.unrelatedKeyIdInToken])
            try await withClient(configuration, credential: ClientFixtures.tokenCredential(pki)) { client in
                let refused = try await client.send(try ClientFixtures.notification(token: "aabbccdd"))
                #expect(refused.status == 403 && refused.reason == .unrelatedKeyIDInToken)
                #expect(APNsOutcome.classify(refused) == .retryLater(perDeviceToken: false, mayHaveReachedAPNs: true))
                let retried = try await client.send(try ClientFixtures.notification(token: "aabbccdd"))
                #expect(retried.status == 200)
            }
            // The refused request's connection was retired; the retry went on a new one.
            #expect(simulator.observation.totalConnections == 2)
            #expect(simulator.observation.records.count == 1)
        }
    }
}
