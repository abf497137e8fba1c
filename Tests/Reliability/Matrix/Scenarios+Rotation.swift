import APNsSimulator
import Crypto
import Foundation
import TestPeers
import WorkerDemo

extension Scenario {
    /// The id of the key the rotation row moves to (the stack's is `EmbeddedStack.keyID`).
    static let rotatedKeyID = "DEMOKEY002"

    /// A key rotation as Kubernetes does it: the Secret's files replaced in place under a running pod.
    static let keyRotation = Scenario(
        "a token key rotated while events flow", .apns, brokers: [.mock], partitions: 4,
        shows: """
            One `apns-worker run` signing with a key read from files (`keyFile`, `keyIdFile`), re-read \
            every second (`credentialReloadInterval`), pushes a steady 30 events/s. After 6 s its key \
            file is overwritten with half a key and left so for 4 s; after 10 s both files are replaced \
            by a new key of the same team and its id, in one step as a Secret update does. The \
            half-written file is refused once and the key before stays in use; the new key is used by \
            a replacement connection within seconds, and the two connections of the old key are \
            replaced one per `connectionReplaceInterval` (2 s), never together. APNs refuses nothing \
            (no 403, no 429 TooManyProviderTokenUpdates), and every event has its result.
            """
    ) { rig, scale in
        let (newKey, keyFile) = try await newKeyTrusted(rig, secret: "secret")
        let idFile = rig.stack.directory + "/secret/key-id"
        try Data("\(EmbeddedStack.keyID)\n".utf8).write(to: URL(fileURLWithPath: idFile))
        let stackToken = "keyId: \(EmbeddedStack.keyID), keyFile: \"\(rig.stack.keyFile)\""
        let process = try rig.startProcess(
            environment: [
                "APNS_WORKER_APNS_CREDENTIAL_RELOAD_INTERVAL": "1s",
                "APNS_WORKER_APNS_CONNECTION_REPLACE_INTERVAL": "2s",
            ],
            rewrite: { text in
                precondition(text.contains(stackToken), "the stack's configuration names its key so")
                return text.replacingOccurrences(
                    of: stackToken, with: "keyIdFile: \"\(idFile)\", keyFile: \"\(keyFile)\"")
            })
        let seconds = scale.events >= Scale.full.events ? 40.0 : 25.0
        let started = ContinuousClock.now
        var produced = 0
        var tick = 0
        var halfWritten = false
        var rotatedAt: Double?
        var connectionsBefore = 0
        // When the simulator accepted each connection from the rotation on, read every 50 ms (a
        // connection's first push can come long after it opened: the other connection had streams).
        let simulator = rig.simulator
        var openings: [Double] = []
        var watching: Task<[Double], Never>?
        var newKeySeen: Double?
        // At least the scale's events, however slowly the machine produces them.
        while ContinuousClock.now - started < .seconds(seconds) || produced < scale.events {
            let elapsed = ContinuousClock.now - started
            if !halfWritten, elapsed >= .seconds(6) {
                // A writer that is not atomic, caught half-way (and left so: it reads the same twice).
                let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: keyFile))
                try handle.truncate(atOffset: 0)
                try handle.write(contentsOf: Data(newKey.pemRepresentation.utf8.prefix(60)))
                try handle.close()
                halfWritten = true
            }
            if rotatedAt == nil, elapsed >= .seconds(10) {
                connectionsBefore = rig.simulator.observation.totalConnections
                watching = Task { [connectionsBefore] in
                    var seen = connectionsBefore
                    var opened: [Double] = []
                    while !Task.isCancelled {
                        let total = simulator.observation.totalConnections
                        if total > seen {
                            opened += Array(repeating: Date().timeIntervalSince1970, count: total - seen)
                            seen = total
                        }
                        try? await Task.sleep(for: .milliseconds(50))
                    }
                    return opened
                }
                // Both files in one step, as Kubernetes swaps a Secret's directory.
                try Data(newKey.pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyFile), options: .atomic)
                try Data("\(rotatedKeyID)\n".utf8).write(to: URL(fileURLWithPath: idFile), options: .atomic)
                rotatedAt = Date().timeIntervalSince1970
            }
            if let rotatedAt, newKeySeen == nil,
                rig.simulator.observation.providerTokens(keyID: rotatedKeyID).distinctTokens > 0
            {
                newKeySeen = Date().timeIntervalSince1970 - rotatedAt
            }
            tick += 1
            let batch = rig.mixedBatch(15, seed: UInt64(3000 + tick))
            try await rig.produce(batch.records)
            produced += batch.records.count
            try await Task.sleep(for: .milliseconds(500))
        }
        rig.faultCleared()
        try await rig.waitForResults(produced, within: 60)
        watching?.cancel()
        openings = await watching?.value ?? []

        let observation = rig.simulator.observation
        let records = observation.records
        let rotated = rotatedAt ?? 0
        // When the old key last pushed.
        var lastOldKey = rotated
        for record in records where record.receivedAt > rotated && Self.keyID(record) == EmbeddedStack.keyID {
            lastOldKey = max(lastOldKey, record.receivedAt)
        }
        let gaps = zip(openings.dropFirst(), openings).map { $0 - $1 }
        let refused = process.stdout.components(separatedBy: "do not load").count - 1
        rig.logger.notice(
            "key rotation",
            metadata: [
                "events": "\(produced)",
                "new key first used after": "\(newKeySeen.map { String(format: "%.1f s", $0) } ?? "never")",
                "old key last used after": "\(String(format: "%.1f s", lastOldKey - rotated))",
                "connections opened since": "\(openings.count)",
                "gaps between them": "\(gaps.map { String(format: "%.1f s", $0) })",
                "refusals logged": "\(refused)", "403": "\(observation.count(status: 403))",
                "429 TooManyProviderTokenUpdates": "\(observation.count(.tooManyProviderTokenUpdates))",
                "429 TooManyRequests (the sample's throttled devices)": "\(observation.count(.tooManyRequests))",
            ])
        var problems: [String] = []
        let tokenUpdates = observation.count(.tooManyProviderTokenUpdates)
        if observation.count(status: 403) > 0 || tokenUpdates > 0 {
            problems.append(
                "APNs refused: \(observation.count(status: 403)) × 403, \(tokenUpdates) × 429 TooManyProviderTokenUpdates"
            )
        }
        if (newKeySeen ?? .infinity) > 30 { problems.append("the new key was not in use within 30 s") }
        if lastOldKey - rotated > 30 { problems.append("the old key was still in use 30 s after the rotation") }
        if openings.count < 2 { problems.append("\(openings.count) connections opened since the rotation, not 2") }
        if let gap = gaps.min(), gap < 1.0 {
            problems.append("two connections replaced \(String(format: "%.1f", gap)) s apart")
        }
        if refused != 1 { problems.append("the half-written key was logged as refused \(refused) times, not once") }
        if !problems.isEmpty { throw ScenarioFailure(problems.joined(separator: "; ")) }
    }

    /// The Secret updated before the ConfigMap: the key file replaced by a new key while `keyId` in
    /// the configuration still names the old one.
    static let newKeyUnderFixedID = Scenario(
        "a new key under a fixed keyId", .apns, brokers: [.mock], partitions: 4,
        shows: """
            One `apns-worker run` with `keyId` fixed in its configuration and its key read from a file             re-read every second pushes a steady 30 events/s; after 4 s the key file is replaced by a new             key of the team (which APNs knows under another id), and connections are replaced every             second. The new key is refused at the reload, said once, and never used: the old key signs             every push, APNs refuses none (no 403 InvalidProviderToken), and every event has its result.
            """
    ) { rig, scale in
        let (newKey, keyFile) = try await newKeyTrusted(rig, secret: "fixed-id-secret")
        let stackKeyFile = "keyFile: \"\(rig.stack.keyFile)\""
        let process = try rig.startProcess(
            environment: [
                "APNS_WORKER_APNS_CREDENTIAL_RELOAD_INTERVAL": "1s",
                "APNS_WORKER_APNS_CONNECTION_REPLACE_INTERVAL": "1s",
            ],
            rewrite: { text in
                precondition(text.contains(stackKeyFile), "the stack's configuration names its key file so")
                return text.replacingOccurrences(of: stackKeyFile, with: "keyFile: \"\(keyFile)\"")
            })
        let seconds = scale.events >= Scale.full.events ? 30.0 : 14.0
        let started = ContinuousClock.now
        var produced = 0
        var tick = 0
        var swapped = false
        while ContinuousClock.now - started < .seconds(seconds) || produced < scale.events {
            if !swapped, ContinuousClock.now - started >= .seconds(4) {
                try Data(newKey.pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyFile), options: .atomic)
                swapped = true
            }
            tick += 1
            let batch = rig.mixedBatch(15, seed: UInt64(5000 + tick))
            try await rig.produce(batch.records)
            produced += batch.records.count
            try await Task.sleep(for: .milliseconds(500))
        }
        rig.faultCleared()
        try await rig.waitForResults(produced, within: 60)
        let observation = rig.simulator.observation
        let refused = process.stdout.components(separatedBy: "InvalidProviderToken").count - 1
        rig.logger.notice(
            "new key under a fixed keyId",
            metadata: [
                "events": "\(produced)", "403": "\(observation.count(status: 403))",
                "refusals logged": "\(refused)",
                "pushes with the new key's id": "\(observation.providerTokens(keyID: rotatedKeyID).distinctTokens)",
            ])
        var problems: [String] = []
        if observation.count(status: 403) > 0 {
            problems.append("APNs refused \(observation.count(status: 403)) pushes with 403")
        }
        if refused != 1 {
            problems.append("the new key under the old id was logged as refused \(refused) times, not once")
        }
        if !problems.isEmpty { throw ScenarioFailure(problems.joined(separator: "; ")) }
    }

    /// A new key of the stack's team that the simulator (restarted) trusts under `rotatedKeyID`, APNs
    /// answering after 100 ms, and a copy of the stack's key in a directory of its own, as a mounted
    /// Secret's (`secret`, under the stack's): the new key, and the copy's path.
    static func newKeyTrusted(_ rig: Rig, secret: String) async throws -> (P256.Signing.PrivateKey, String) {
        let newKey = P256.Signing.PrivateKey()
        try await rig.restartSimulator(after: .zero) { configuration in
            configuration.tokenKeys.append(
                ProviderTokenKey(teamID: EmbeddedStack.teamID, keyID: rotatedKeyID, publicKey: newKey.publicKey))
        }
        rig.pace()
        let directory = rig.stack.directory + "/" + secret
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let keyFile = directory + "/AuthKey.p8"
        try FileManager.default.copyItem(atPath: rig.stack.keyFile, toPath: keyFile)
        return (newKey, keyFile)
    }

    /// The `kid` of a recorded request's provider token.
    static func keyID(_ record: NotificationRecord) -> String? {
        record.headers.first(where: { $0.name == "authorization" }).flatMap {
            providerTokenKeyID(authorization: $0.value)
        }
    }
}
