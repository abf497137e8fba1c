import Foundation
import Testing
import Yams

@testable import Worker

/// The configuration shipped in deploy/ must load with the worker's own loader, not just pass
/// deploy/check.py's copy of the rules.
@Suite("deploy/: the Kubernetes ConfigMap's config.yaml")
struct DeployConfigTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test("the ConfigMap's config.yaml loads with the worker's own loader and the Deployment's environment")
    func loadsWithTheWorkersLoader() throws {
        let manifest = try String(
            contentsOf: Self.root.appendingPathComponent("deploy/kubernetes/configmap.yaml"), encoding: .utf8)
        let documents = try Yams.load_all(yaml: manifest).compactMap { $0 as? [String: Any] }
        let configMap = try #require(documents.first { $0["kind"] as? String == "ConfigMap" })
        let text = try #require((configMap["data"] as? [String: Any])?["config.yaml"] as? String)
        // The environment the Deployment gives the container.
        let environment = [
            "APNS_WORKER_KAFKA_SASL_USERNAME": "apns-worker",
            "APNS_WORKER_KAFKA_SASL_PASSWORD": "secret-from-the-kafka-secret",
            "APNS_WORKER_KAFKA_CLIENT_ID": "apns-worker-7d9f-abcde",
        ]
        let configuration = try WorkerConfiguration.parse(text, file: "configmap.yaml", environment: environment)
        #expect(!configuration.consumer.topics.isEmpty)
        #expect(configuration.kafka["sasl.password"] == "secret-from-the-kafka-secret")
        #expect(configuration.delivery.shutdownTimeout < .seconds(60), "below the Deployment's grace period")
        #expect(configuration.apns.credentials.count >= 1)
    }
}
