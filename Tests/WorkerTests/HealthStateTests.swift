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

    // One app's broken key made the whole pod unready: every app on it paid for one (a rollout
    // stopped, ApnsWorkerNotReady paged), though the pod pushed for every other app and a restart
    // fixes no key.
    @Test("one broken credential of two: said in readiness, the pod stays ready; both broken: unready")
    func oneBrokenCredentialOfSeveral() {
        let health = HealthState(wallClock: { Date(timeIntervalSince1970: 1_795_000_000) })
        health.configure(credentials: ["app", "mdm"])
        health.markConsumerJoined()
        health.markCredentialBroken(name: "app", reason: "InvalidProviderToken")
        #expect(health.readiness.isReady, "mdm still pushes")
        #expect(health.readiness.credentials == "app: InvalidProviderToken since 2026-11-18T11:06:40Z")
        health.markCredentialBroken(name: "mdm", reason: "BadCertificate")
        #expect(!health.readiness.isReady, "no credential can push")
        #expect(health.readiness.everyCredentialBroken)
        health.markCredentialHealthy(name: "mdm")
        #expect(health.readiness.isReady)
        // A worker with one credential: that one broken is every one.
        let single = HealthState()
        single.configure(credentials: ["app"])
        single.markConsumerJoined()
        single.markCredentialBroken(name: "app", reason: "InvalidProviderToken")
        #expect(!single.readiness.isReady)
    }

    @Test("a consumer outside its group says the last error librdkafka reported reaching Kafka, until it joins")
    func consumerOutsideSaysWhy() {
        var machine = HealthState.StateMachine(now: .now)
        #expect(machine.readiness.kafka == "consumer has not joined its group")
        let tls = "Kafka error _SSL: ssl://127.0.0.1:9093/bootstrap: SSL handshake failed: certificate verify failed"
        machine.kafkaFailed(tls, summary: false)
        #expect(machine.readiness.kafka == "consumer has not joined its group; last Kafka error: \(tls)")
        // "1/1 brokers are down" follows every broker's own error and says less: it does not replace it.
        machine.kafkaFailed("Kafka error _ALL_BROKERS_DOWN: 1/1 brokers are down", summary: true)
        #expect(machine.readiness.kafka.hasSuffix(tls))
        machine.consumerJoined()
        #expect(machine.readiness.kafka == "ok")
        // Joined, librdkafka reconnects on its own while the group holds: still ready.
        machine.kafkaFailed("Kafka error _TRANSPORT: ssl://127.0.0.1:9093/1: Disconnected", summary: false)
        #expect(machine.readiness.kafka == "ok")
        // Kept once outside again (librdkafka does not repeat an identical error for 30 s).
        machine.consumerLeft()
        #expect(machine.readiness.kafka.hasSuffix("Disconnected"))
        machine.consumerJoined()
        machine.consumerLeft()
        #expect(machine.readiness.kafka == "consumer has not joined its group", "joining clears the error")
        // Only a summary known: it is said.
        machine.kafkaFailed("Kafka error _ALL_BROKERS_DOWN: 1/1 brokers are down", summary: true)
        #expect(machine.readiness.kafka.hasSuffix("1/1 brokers are down"))
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

@Suite("Process metrics from /proc")
struct ProcessMetricsTests {
    @Test("a command name with spaces and parentheses does not shift the fields of /proc/self/stat")
    func statWithOddName() throws {
        let stat =
            "4242 (apns (worker) 2) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 17 0 100000 "
            + "1073741824 25600 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0"
        let parsed = try #require(ProcessMetrics.parseStat(stat))
        #expect(parsed.userTicks == 250 && parsed.systemTicks == 50)
        #expect(parsed.threads == 17)
        #expect(parsed.startTicks == 100_000)
        #expect(parsed.virtualBytes == 1_073_741_824)
        #expect(parsed.residentPages == 25_600)
        #expect(ProcessMetrics.parseStat("garbage") == nil)
    }

    @Test("this process's sample is plausible: megabytes resident, some CPU, open descriptors, threads")
    func ownSample() throws {
        let sample = try #require(ProcessMetrics.sample())
        #expect(sample.residentBytes > 1_000_000)
        #expect(sample.cpuSeconds > 0)
        #expect(sample.openFileDescriptors >= 3)
        #expect(sample.threads >= 1)
        #expect(abs(sample.startTimeSeconds - Date().timeIntervalSince1970) < 86_400)
        let text = ProcessMetrics.text(sample)
        #expect(text.contains("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total "))
    }
}
