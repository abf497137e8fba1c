import Foundation
import Testing

@testable import Worker

@Suite("Health state")
struct HealthStateTests {
    @Test("the first reason and time of a broken credential are kept; several are listed by name")
    func brokenCredentials() {
        let health = HealthState(wallClock: { Date(timeIntervalSince1970: 1_795_000_000) })
        health.markConsumerJoined()
        health.markCredentialBroken(name: "mdm", reason: "BadCertificate")
        health.markCredentialBroken(name: "app", reason: "InvalidProviderToken")
        health.markCredentialBroken(name: "app", reason: "Forbidden")
        let readiness = health.readiness
        #expect(!readiness.isReady)
        #expect(readiness.kafka == "ok")
        #expect(
            readiness.credentials
                == "app: InvalidProviderToken since 2026-11-18T11:06:40Z; mdm: BadCertificate since 2026-11-18T11:06:40Z"
        )
        health.markCredentialHealthy(name: "app")
        health.markCredentialHealthy(name: "mdm")
        #expect(health.readiness.isReady)
        health.markConsumerLeft()
        #expect(!health.readiness.isReady)
    }

    @Test("concurrent updates and reads are safe", .timeLimit(.minutes(1)))
    func concurrent() async {
        let health = HealthState()
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for round in 0..<2_000 {
                        let name = "credential-\(worker)-\(round % 4)"
                        health.heartbeat()
                        health.markCredentialBroken(name: name, reason: "InvalidProviderToken")
                        _ = health.readiness
                        _ = health.isLive
                        health.markCredentialHealthy(name: name)
                    }
                }
            }
        }
        health.markConsumerJoined()
        #expect(health.readiness.isReady)
        #expect(health.isLive)
    }
}
