import ArgumentParser
import Kafka
import Worker

/// `apns-worker`: the root command. Each subcommand is one line in `subcommands`; they parse flags,
/// call into Worker, and print. No logic lives here.
struct APNsWorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-worker",
        abstract: "Kafka in, Apple Push Notification service out.",
        // The release, then the librdkafka the process runs with (make test prints it in the log).
        version: "\(WorkerVersion.current)\nlibrdkafka \(KafkaLibrary.version)",
        subcommands: [RunCommand.self, CheckCommand.self] + embeddedStackCommands + [
            ReplayCommand.self,
            ValidateCommand.self,
            SendCommand.self,
            ChannelsCommand.self,
        ]
    )
}

// `demo` and `dev` exist in builds with the `Demo` package trait (the default); the container
// image is built without it, so its binary links neither the simulator nor the mock stack.
#if Demo
    private let embeddedStackCommands: [any ParsableCommand.Type] = [DemoCommand.self, DevCommand.self]
#else
    private let embeddedStackCommands: [any ParsableCommand.Type] = []
#endif

/// Runs the command line with the project's exit codes: usage errors exit 2 (ArgumentParser's
/// default is 64). Each subcommand's help gives its own codes: for `validate` 0 valid, 1 invalid,
/// 2 cannot tell; `check` says 2 for a configuration that is not valid.
@main
enum Main {
    static func main() async {
        do {
            var command = try APNsWorkerCommand.parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            let code = APNsWorkerCommand.exitCode(for: error)
            if code == .validationFailure {
                FileOutput.standardError.write(usageError(error) + "\n")
                APNsWorkerCommand.exit(withError: ExitCode(2))
            }
            APNsWorkerCommand.exit(withError: error)
        }
    }
}

/// A usage error with the usage of the subcommand it is about (`apns-worker send` without
/// arguments shows how to call `send`, not the list of subcommands).
private func usageError(_ error: any Error) -> String {
    var command: any ParsableCommand.Type = APNsWorkerCommand.self
    var path: [String] = []
    for argument in CommandLine.arguments.dropFirst() {
        guard
            let next = command.configuration.subcommands.first(where: { $0._commandName == argument })
        else { break }
        command = next
        path.append(argument)
    }
    guard !path.isEmpty else { return APNsWorkerCommand.fullMessage(for: error) }
    return "Error: \(APNsWorkerCommand.message(for: error))\n"
        + "Usage: " + APNsWorkerCommand.usageString(for: command)
        + "\n  See 'apns-worker \(path.joined(separator: " ")) --help' for more information."
}
