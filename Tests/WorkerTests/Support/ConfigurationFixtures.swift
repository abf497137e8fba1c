import Foundation

@testable import Worker

/// Configuration texts shared by the configuration tests.
enum ConfigurationFixtures {
    /// Every problem `text` (read as worker.yaml) has, as `check` prints them; empty when it loads.
    static func errors(_ text: String, environment: [String: String] = [:]) -> [String] {
        do {
            _ = try WorkerConfiguration.parse(text, file: "worker.yaml", environment: environment)
            return []
        } catch {
            return error.all.map(\.description)
        }
    }

    /// The smallest valid file: only the required keys.
    static let minimalYAML = """
        kafka:
          bootstrap.servers: "kafka-0:9092"
        consumer:
          topics: [notifications]
        topics:
          results: apns-results
          deadLetters: apns-dead-letters
        apns:
          credentials:
            - name: app
              topics: ["com.example.app"]
              token: { teamId: ABCDE12345, keyId: KEY1234567, keyFile: /keys/AuthKey.p8 }
        """

    /// docs/configuration.md's example file, extended so that every key is set (to values other than
    /// the defaults where possible).
    static let fullYAML = """
        kafka:
          bootstrap.servers: "kafka-0:9092,kafka-1:9092"
          security.protocol: SASL_SSL
          sasl.mechanism: SCRAM-SHA-512
          sasl.username: apns-worker
          sasl.password: hunter2-very-secret
        consumer:
          group: pushers
          topics: [notifications, urgent-notifications]
          bufferCapacity: 4096
          properties: { fetch.min.bytes: 1024, sasl.username: consumer-user }
        producer:
          deliveryTimeout: 2m
          properties:
            linger.ms: 10
        topics:
          results: apns-results
          deadLetters: apns-dead-letters
        apns:
          connectionsPerCredential: 2
          requestTimeout: 1.5s
          caFile: /etc/simulator-ca.pem
          endpoints:
            production:  { host: simulator, port: 8443 }
            development: { host: simulator-dev }
          credentials:
            - name: app
              topics: ["com.example.app", "com.example.app.*"]
              token:
                teamId: ABCDE12345
                keyId: KEY1234567
                keyEnv: APNS_KEY_P8
            - name: mdm
              topics: ["com.apple.mgmt.External.*"]
              certificate:
                certificateFile: /secrets/mdm.pem
                privateKeyFile: /secrets/mdm-key.pem
                passwordEnv: MDM_KEY_PASSWORD
            - name: legacy
              topics: ["com.example.legacy"]
              certificate:
                p12File: /secrets/legacy.p12
        delivery:
          maxInFlight: 500
          maxInFlightPerCredential: 200
          maxParked: 1000
          commitInterval: 250ms
          retry:
            maxAttempts: 5
            initialBackoff: 100ms
            maxBackoff: 10s
            maxRetryDuration: 5m
          revocationTimeout: 20s
          shutdownTimeout: 45
        http:
          host: 127.0.0.1
          port: 9090
        logging:
          level: debug
          format: text
        """

    static let minimalJSON = """
        {"kafka": {"bootstrap.servers": "kafka-0:9092"},
         "consumer": {"topics": ["notifications"]},
         "topics": {"results": "apns-results", "deadLetters": "apns-dead-letters"},
         "apns": {"credentials": [{"name": "app", "topics": ["com.example.app"],
                                   "token": {"teamId": "ABCDE12345", "keyId": "KEY1234567", "keyFile": "/k.p8"}}]},
         "delivery": {"retry": {"maxAttempts": 3}, "commitInterval": 2}}
        """

    /// Writes `text` to a fresh temporary file and returns its path.
    static func write(_ text: String, extension fileExtension: String = "yaml") throws -> String {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("apns-worker-config-\(UUID().uuidString).\(fileExtension)").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
