import Foundation
import Logging
import NIOConcurrencyHelpers
import Worker

/// `apns-worker dev`: the demo's embedded pieces, kept running with the worker over them, so a user
/// can produce events with kcat and watch the results arrive. Ends on SIGINT/SIGTERM.
package enum DevEnvironment {
    package static func run(logger: Logger, print: @escaping @Sendable (String) -> Void) async throws {
        let stack = try await EmbeddedStack.start(logger: logger)
        // Devices are made up on the spot in dev: any token is accepted, as if registered.
        stack.simulator.devices.policy = .accept
        do {
            // A broadcast channel made at start through channel management, for Live Activity updates.
            let channel = try await stack.createChannel()
            let configurationText = stack.configurationText(group: "apns-worker-dev")
            let configurationFile = stack.directory + "/config.yaml"
            try configurationText.write(toFile: configurationFile, atomically: true, encoding: .utf8)
            let assembly = try WorkerRuntime.assemble(try stack.configuration(group: "apns-worker-dev"), logger: logger)
            { port in
                let bootstrap = stack.cluster.bootstrapServers
                print(
                    """
                    apns-worker dev: the worker runs over an in-process mock Kafka and the APNs simulator.

                      Kafka bootstrap   \(bootstrap)
                      input topic       \(EmbeddedStack.inputTopic)
                      results topic     \(EmbeddedStack.resultsTopic)
                      dead letters      \(EmbeddedStack.deadLetterTopic)
                      APNs simulator    https://localhost:\(stack.simulator.port) (CA \(stack.directory)/tls/ca.pem)
                      channel mgmt      https://localhost:\(stack.simulator.managementPort)
                      broadcast channel \(channel) (\(EmbeddedStack.bundleID), No Message Stored)
                      metrics, health   http://127.0.0.1:\(port)/metrics  /health/live  /health/ready
                      configuration     \(configurationFile)

                    Send an event:
                      echo '{"id":"e1","deviceToken":"00fc13adff785122b4ad28809a3420982341241421348097878e577c991de8f0","topic":"\(EmbeddedStack.bundleID)","pushType":"alert","payload":{"aps":{"alert":"Hi"}}}' \\
                        | kcat -b \(bootstrap) -P -t \(EmbeddedStack.inputTopic)
                    Broadcast a Live Activity update to every device on the channel:
                      echo '{"id":"b1","channelId":"\(channel)","topic":"\(EmbeddedStack.bundleID)","pushType":"liveactivity","priority":10,"expiration":0,"payload":{"aps":{"timestamp":1767225600,"event":"update","content-state":{"score":"2-1"}}}}' \\
                        | kcat -b \(bootstrap) -P -t \(EmbeddedStack.inputTopic)
                    Watch the results and dead letters:
                      kcat -b \(bootstrap) -C -t \(EmbeddedStack.resultsTopic) -f '%k %s\\n'
                      kcat -b \(bootstrap) -C -t \(EmbeddedStack.deadLetterTopic) -f '%k %s %h\\n'
                    List the app's channels (token key \(stack.keyFile)):
                      apns-worker channels list --bundle-id \(EmbeddedStack.bundleID) --host localhost --port \(stack.simulator.managementPort) \\
                        --ca-file \(stack.directory)/tls/ca.pem --key-file \(stack.keyFile) --team-id \(EmbeddedStack.teamID) --key-id \(EmbeddedStack.keyID)
                    Replay dead letters:
                      apns-worker replay --bootstrap-servers \(bootstrap) --from \(EmbeddedStack.deadLetterTopic) --dry-run

                    Ctrl-C stops everything.
                    """)
            }
            WorkerRuntime.exitOnSecondSignal()
            try await assembly.run()
        } catch {
            await stack.shutdown()
            throw error
        }
        await stack.shutdown()
    }
}
