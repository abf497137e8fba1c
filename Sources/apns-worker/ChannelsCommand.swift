import APNs
import ArgumentParser
import Logging
import Foundation
import Worker

/// `apns-worker channels create|get|delete|list`: Apple's broadcast channel management by hand.
struct ChannelsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channels",
        abstract: "Manage broadcast channels (Live Activities, iOS 18+) with Apple's channel management.",
        discussion: """
            Talks to api-manage-broadcast[.sandbox].push.apple.com (ports 2196, 2195) with the same \
            credential flags as send. Prints a table, or JSON with --json. Exit status: 0 done, 1 APNs \
            refused (its status and reason are printed), 2 usage, configuration or connection errors.
            """,
        subcommands: [Create.self, Get.self, Delete.self, List.self]
    )

    /// What every subcommand takes: where, who, and how to print.
    struct Options: ParsableArguments {
        @Option(name: .customLong("bundle-id"), help: "The app's bundle ID (no push-type suffix).")
        var bundleID: String
        @Option(name: .long, help: "production or development.")
        var environment: APNsEnvironment = .production
        @Option(name: .long, help: "Override the channel-management host (the simulator).")
        var host: String?
        @Option(name: .long, help: "With --host: its port.")
        var port: Int?
        @Option(
            name: .customLong("ca-file"),
            help: ArgumentHelp("Trust these roots (PEM) instead of the system store.", valueName: "FILE"))
        var caFile: String?
        @Option(
            help: ArgumentHelp(
                "Tunnel through this HTTP proxy (CONNECT): http://[user:password@]host[:port]. Without it, HTTPS_PROXY (unless NO_PROXY exempts the host), as the worker does.",
                valueName: "URL"))
        var proxy: String?
        @OptionGroup var credentials: CredentialFlags
        @Flag(help: "Print JSON instead of a table.") var json = false

        func validate() throws {
            do {
                try APNsBroadcast.validateBundleID(bundleID)
            } catch {
                throw ValidationError("--bundle-id: \(error.message)")
            }
        }

        /// The manager these flags describe (usage errors as `ValidationError`).
        func manager() throws -> APNsChannelManager {
            try credentials.checkOne()
            if port != nil, host == nil {
                throw ValidationError("--port goes with --host: Apple's hosts have their own ports")
            }
            var configuration = APNsClientConfiguration(
                environment: environment, host: host, port: port ?? APNsChannelManager.port(for: environment),
                tls: APNsTLSConfiguration(trust: caFile.map { .caFile($0) } ?? .system))
            configuration.reconnectMaximum = .seconds(1)
            if let proxy {
                do {
                    configuration.proxy = try APNsProxy(url: proxy)
                } catch {
                    throw ValidationError("--proxy: \(error)")
                }
            } else {
                configuration.proxy = try APNsSettings.environmentProxy(
                    forHost: host ?? APNsChannelManager.host(for: environment),
                    environment: ProcessInfo.processInfo.environment)
            }
            var quiet = Logger(label: "apns-worker.channels")
            quiet.logLevel = .warning  // the pool's info lines would land on stderr beside the answer
            return try APNsChannelManager(
                configuration: configuration, credential: credentials.credential(), logger: quiet)
        }

        /// Runs `body` with a manager, printing what went wrong with the project's exit codes.
        func run(_ body: (APNsChannelManager) async throws -> [String]) async throws {
            let manager: APNsChannelManager
            do {
                manager = try self.manager()
            } catch let error as ValidationError {
                throw error
            } catch {
                FileOutput.standardError.write("configuration error: \(error)\n")
                throw ExitCode(2)
            }
            do {
                let lines = try await body(manager)
                await manager.shutdown()
                for line in lines { FileOutput.standardOutput.write(line + "\n") }
            } catch let failure as APNsChannelManager.Failure {
                await manager.shutdown()
                FileOutput.standardError.write("\(failure)\n")
                throw ExitCode(1)
            } catch {
                await manager.shutdown()
                FileOutput.standardError.write("error: \(error)\n")
                throw ExitCode(2)
            }
        }

        func render(_ channels: [APNsChannelManager.Channel]) -> [String] {
            if json {
                let items = channels.map { channel in
                    var fields = [#""channelId":\#(JSONText.quoted(channel.id))"#]
                    if let policy = channel.storagePolicy {
                        fields.append(#""messageStoragePolicy":\#(policy.rawValue)"#)
                    }
                    if let type = channel.pushType { fields.append(#""pushType":\#(JSONText.quoted(type))"#) }
                    return "{" + fields.joined(separator: ",") + "}"
                }
                return ["[" + items.joined(separator: ",") + "]"]
            }
            var lines = ["channel id" + String(repeating: " ", count: 36) + "storage policy"]
            for channel in channels {
                let id =
                    channel.id.count >= 46
                    ? channel.id + " " : channel.id + String(repeating: " ", count: 46 - channel.id.count)
                lines.append(id + (channel.storagePolicy.map { "\($0.rawValue) (\($0))" } ?? "-"))
            }
            return lines
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a channel; prints its id.")
        @OptionGroup var options: Options
        @Option(
            name: .customLong("storage-policy"),
            help: "0: no message stored (broadcasts need expiration 0), 1: the most recent message stored.")
        var storagePolicy = 0

        func run() async throws {
            guard let policy = APNsChannelManager.StoragePolicy(rawValue: storagePolicy) else {
                throw ValidationError("--storage-policy must be 0 or 1")
            }
            try await options.run { manager in
                options.render([try await manager.create(bundleID: options.bundleID, storagePolicy: policy)])
            }
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a channel's storage policy.")
        @OptionGroup var options: Options
        @Option(
            name: .customLong("channel-id"),
            help: ArgumentHelp("The channel's id (base64, as create or list printed it).", valueName: "ID"))
        var channelID: String

        func run() async throws {
            try await options.run { manager in
                options.render([try await manager.read(bundleID: options.bundleID, channelID: channelID)])
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a channel (its id never comes back).")
        @OptionGroup var options: Options
        @Option(
            name: .customLong("channel-id"),
            help: ArgumentHelp("The channel's id (base64, as create or list printed it).", valueName: "ID"))
        var channelID: String

        func run() async throws {
            try await options.run { manager in
                try await manager.delete(bundleID: options.bundleID, channelID: channelID)
                return options.json ? [#"{"deleted":\#(JSONText.quoted(channelID))}"#] : ["deleted \(channelID)"]
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the app's channels in this environment.")
        @OptionGroup var options: Options

        func run() async throws {
            try await options.run { manager in
                let ids = try await manager.list(bundleID: options.bundleID)
                return options.render(ids.map { APNsChannelManager.Channel(id: $0, storagePolicy: nil, pushType: nil) })
            }
        }
    }
}
