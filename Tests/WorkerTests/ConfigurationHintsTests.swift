import Foundation
import Testing

@testable import Worker

/// What a new operator met: a misspelt key or variable got no hint, and a credential that routing
/// could never choose passed.
@Suite("Configuration hints: did you mean, and credentials that can never be used")
struct ConfigurationHintsTests {
    private func failure(_ text: String, environment: [String: String] = [:]) -> ConfigurationError? {
        do {
            _ = try WorkerConfiguration.parse(text, file: "worker.yaml", environment: environment)
            return nil
        } catch {
            return error
        }
    }

    // Before: "unknown key" alone, for deadLeters and for keyfile.
    @Test("a misspelt key suggests the key it resembles; an unrelated one suggests nothing")
    func misspeltKeys() {
        let letters = failure(
            ConfigurationFixtures.minimalYAML.replacingOccurrences(of: "deadLetters:", with: "deadLeters:"))
        #expect(
            letters?.description
                == "worker.yaml:5: topics.deadLetters: required key is missing (line 7 has deadLeters: did you mean deadLetters?)",
            "\(String(describing: letters))")
        let keyFile = failure(ConfigurationFixtures.minimalYAML.replacingOccurrences(of: "keyFile:", with: "keyfile:"))
        #expect(
            keyFile?.description.contains(
                "token.keyFile: expected keyFile or keyEnv (line 12 has keyfile: did you mean keyFile?)") == true,
            "\(String(describing: keyFile))")
        // Present but misspelt where nothing is required: the unknown key names what it resembles.
        let retry = failure(ConfigurationFixtures.minimalYAML + "\ndelivery:\n  retry:\n    maxAtempts: 3\n")
        #expect(
            retry?.description.hasSuffix("delivery.retry.maxAtempts: unknown key (did you mean maxAttempts?)") == true)
        let unrelated = failure(ConfigurationFixtures.minimalYAML + "\nwidgets: 3\n")
        #expect(unrelated?.description.hasSuffix("widgets: unknown key") == true, "\(String(describing: unrelated))")
    }

    // Before: "matches no configuration key" for both.
    @Test("a misspelt variable suggests the one it resembles; one for a file-only key says where it is set")
    func misspeltVariables() {
        let inflight = failure(
            ConfigurationFixtures.minimalYAML, environment: ["APNS_WORKER_DELIVERY_MAX_INFLIGHT": "10"])
        #expect(inflight?.description.contains("did you mean APNS_WORKER_DELIVERY_MAX_IN_FLIGHT?") == true)
        let credentials = failure(
            ConfigurationFixtures.minimalYAML, environment: ["APNS_WORKER_APNS_CREDENTIALS": "[]"])
        #expect(credentials?.description.contains("apns.credentials is set in the configuration file only") == true)
        #expect(credentials?.description.contains("keyEnv") == true, "\(String(describing: credentials))")
    }

    private func credentials(_ entries: String) -> String {
        ConfigurationFixtures.minimalYAML.replacingOccurrences(
            of: """
                    - name: app
                      topics: ["com.example.app"]
                      token: { teamId: ABCDE12345, keyId: KEY1234567, keyFile: /keys/AuthKey.p8 }
                """, with: entries)
    }

    // Before: `valid`, exit 0, and the second app's events went out with the first one's key.
    @Test("a credential whose every topic an earlier one matches is refused at its topics line, naming both")
    func shadowedCredential() throws {
        let key = "token: { teamId: ABCDE12345, keyId: KEY1234567, keyFile: /keys/AuthKey.p8 }"
        let shadowed = failure(
            credentials(
                """
                    - name: all
                      topics: ["com.example.*"]
                      \(key)
                    - name: shop
                      topics: ["com.example.shop", "com.example.shop.*"]
                      \(key)
                """))
        #expect(shadowed?.keyPath == "apns.credentials[1].topics")
        #expect(shadowed?.line == 14)
        #expect(
            shadowed?.message
                == "credential \"shop\" can never be used: credential \"all\" comes first and matches every topic it does (\"com.example.*\" covers \"com.example.shop\"); move it above, or narrow \"all\"'s topics"
        )
        // Partly reachable, in the other order, or behind a credential for one environment only: fine.
        for entries in [
            "    - name: all\n      topics: [\"com.example.*\"]\n      \(key)\n    - name: shop\n      topics: [\"com.example.shop\", \"com.other\"]\n      \(key)",
            "    - name: shop\n      topics: [\"com.example.shop\"]\n      \(key)\n    - name: all\n      topics: [\"com.example.*\"]\n      \(key)",
            "    - name: sandbox\n      topics: [\"com.example.*\"]\n      environment: development\n      \(key)\n    - name: all\n      topics: [\"com.example.shop\"]\n      \(key)",
        ] {
            #expect(failure(credentials(entries)) == nil, "\(entries)")
        }
    }

    // Before: `initialBackoff: 200` (200 s) gave only "maxBackoff: must not be less than
    // initialBackoff", on a key the file did not set.
    @Test(
        "initialBackoff above maxBackoff is said on the key that was set, with both values and what a bare number means"
    )
    func backoffOrder() {
        let bare = failure(ConfigurationFixtures.minimalYAML + "\ndelivery:\n  retry:\n    initialBackoff: 200\n")
        #expect(
            bare?.description.hasSuffix(
                "delivery.retry.initialBackoff: 200s is more than maxBackoff's default, 30s; a bare number is seconds: write 200ms for milliseconds"
            ) == true, "\(String(describing: bare))")
        let both = failure(
            ConfigurationFixtures.minimalYAML + "\ndelivery:\n  retry:\n    initialBackoff: 2m\n    maxBackoff: 1m\n")
        #expect(
            both?.description.hasSuffix("delivery.retry.initialBackoff: 2m is more than maxBackoff, 1m") == true,
            "\(String(describing: both))")
        let maximum = failure(ConfigurationFixtures.minimalYAML + "\ndelivery:\n  retry:\n    maxBackoff: 50ms\n")
        #expect(
            maximum?.description.hasSuffix(
                "delivery.retry.maxBackoff: 50ms is less than initialBackoff's default, 200ms")
                == true, "\(String(describing: maximum))")
    }

    // Before: "worker.yaml:…: consumer.lanes.urgent.topics: "alerts" is not an input topic", blaming
    // the file for what the environment had changed.
    @Test("a lane topic outside consumer.topics says when consumer.topics came from the environment")
    func environmentNamed() {
        let text = ConfigurationFixtures.minimalYAML.replacingOccurrences(
            of: "  topics: [notifications]\n",
            with: "  topics: [notifications, alerts]\n  lanes: { urgent: { topics: [alerts] } }\n")
        let error = failure(text, environment: ["APNS_WORKER_CONSUMER_TOPICS": "a,b"])
        #expect(
            error?.description.contains(
                "\"alerts\" is not an input topic: a lane's topics are some of consumer.topics (a, b, set by APNS_WORKER_CONSUMER_TOPICS)"
            ) == true, "\(String(describing: error))")
    }
}
