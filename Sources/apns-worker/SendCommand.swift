import APNs
import ArgumentParser
import Foundation
import Worker

/// `apns-worker send`: one notification, for checking credentials and tokens by hand.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send one notification (or Live Activity broadcast) and print APNs' answer.",
        discussion: """
            The notification comes from flags, or from a notification event file (--event); either \
            way it is checked with the worker's own event rules before anything is sent. With \
            --channel-id instead of --device-token it is a Live Activity broadcast to that channel \
            (--topic the bare bundle id, --push-type liveactivity, --priority and --expiration). One \
            credential: --key-file (token), --p12-file, or --cert-file with --cert-key-file. Exit \
            status: 0 on 200, 1 when APNs (or a local rule) rejected it, 2 for usage, configuration \
            and connection errors.
            """
    )

    @Option(name: .long, help: "production (default) or development; an --event file says its own.")
    var environment: APNsEnvironment?
    @Option(name: .long, help: "Override the environment's host (the simulator, a proxy).")
    var host: String?
    @Option(name: .long, help: "443 (default) or 2197; anything for the simulator.")
    var port: Int = APNsEnvironment.defaultPort
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Tunnel through this HTTP proxy (CONNECT): http://[user:password@]host[:port]. Without it, HTTPS_PROXY (unless NO_PROXY exempts the host), as the worker does.",
            valueName: "URL"))
    var proxy: String?
    @Option(
        name: .customLong("ca-file"),
        help: ArgumentHelp("Trust these roots (PEM) instead of the system store.", valueName: "FILE"))
    var caFile: String?
    @OptionGroup var credentials: CredentialFlags
    @Option(
        name: .long,
        help: ArgumentHelp(
            "apns-topic: the bundle id, plus the push type's suffix (.voip, .push-type.liveactivity, …); a broadcast's bare bundle id.",
            valueName: "TOPIC"))
    var topic: String?
    @Option(name: .customLong("push-type"), help: "alert (default), background, voip, liveactivity, …")
    var pushType: APNsPushType?
    @Option(
        name: .long,
        help: ArgumentHelp(
            "apns-priority: 10 (at once), 5 (power considerations) or 1 (lowest); APNs' default is 10.",
            valueName: "N"))
    var priority: Int?
    @Option(name: .long, help: "apns-expiration: UNIX seconds, 0 = do not store.") var expiration: Int64?
    @Option(
        name: .customLong("collapse-id"),
        help: ArgumentHelp(
            "apns-collapse-id: notifications with the same one replace each other on the device (64 bytes at most).",
            valueName: "ID"))
    var collapseID: String?
    @Option(name: .customLong("apns-id"), help: "A UUID: the apns-id (a broadcast's apns-request-id).")
    var apnsID: String?
    @Option(
        name: .customLong("device-token"),
        help: ArgumentHelp(
            "The device token, in hex (its app's, in the environment it was issued for).", valueName: "HEX"))
    var deviceToken: String?
    @Option(
        name: .customLong("channel-id"),
        help: ArgumentHelp(
            "Broadcast to this channel instead of one device (`channels create` makes one).", valueName: "ID"))
    var channelID: String?
    @Option(name: .long, help: ArgumentHelp("The JSON payload.", valueName: "JSON")) var payload: String?
    @Option(
        name: .long, help: ArgumentHelp("A notification event file (the worker's input format).", valueName: "FILE"))
    var event: String?

    /// Checked in `run`, not `validate`: ArgumentParser reports a `validate` error in place of an
    /// unknown flag, which would hide a misspelt option behind "give --topic …".
    private func checkFlags() throws {
        try credentials.checkOne()
        if event != nil {
            let flags: [Any?] = [topic, deviceToken, channelID, payload, priority, expiration, collapseID, apnsID]
            if flags.contains(where: { $0 != nil }) {
                throw ValidationError("--event FILE carries the notification: drop the notification flags")
            }
            // The file says where it goes (its "environment", production when absent) and its type.
            if environment != nil {
                throw ValidationError(
                    "--event FILE says its environment (\"environment\", production when absent): drop --environment")
            }
            if pushType != nil {
                throw ValidationError("--event FILE says its push type (\"pushType\"): drop --push-type")
            }
        } else {
            guard topic != nil, (deviceToken == nil) != (channelID == nil), payload != nil else {
                throw ValidationError("give --topic, --device-token (or --channel-id) and --payload, or --event FILE")
            }
        }
        if let priority, APNsPriority(rawValue: priority) == nil {
            throw ValidationError("--priority must be 10, 5 or 1")
        }
        if let apnsID, (try? APNsNotificationID(apnsID)) == nil {
            throw ValidationError("--apns-id must be a UUID (8-4-4-4-12 hex digits)")
        }
    }

    func run() async throws {
        try checkFlags()
        var send = OneShotSend()
        send.environment = environment ?? .production
        send.host = host
        send.port = port
        send.caFile = caFile
        if let proxy {
            do {
                send.proxy = try APNsProxy(url: proxy)
            } catch {
                throw ValidationError("--proxy: \(error)")
            }
        }
        send.teamID = credentials.teamID
        send.keyID = credentials.keyID
        send.keyFile = credentials.keyFile
        send.certificateFile = credentials.certificateFile
        send.certificateKeyFile = credentials.certificateKeyFile
        send.pkcs12File = credentials.pkcs12File
        send.pkcs12Password = credentials.password ?? ""
        // From a file or from flags, the event goes through the worker's decoder: the same rules.
        let prepared: APNsPush
        do {
            let decoded =
                try event.map(EventFile.notification(at:))
                ?? EventFile.notification(flags: [
                    "id": apnsID ?? "apns-worker-send", "deviceToken": deviceToken, "channelId": channelID,
                    "topic": topic,
                    "pushType": (pushType ?? .alert).rawValue, "environment": (environment ?? .production).rawValue,
                    "priority": priority.map(String.init), "expiration": expiration.map(String.init),
                    "collapseId": collapseID, "payload": payload,
                ])
            prepared = decoded.push
            send.environment = decoded.environment
        } catch {
            FileOutput.standardError.write("\(error)\n")
            // A file that cannot be read is a usage error; an event its rules refuse, a rejection.
            throw ExitCode((error as? EventFile.Problem)?.unreadable == true ? 2 : 1)
        }
        if send.proxy == nil {
            do {
                send.proxy = try APNsSettings.environmentProxy(
                    forHost: host ?? send.environment.host, environment: ProcessInfo.processInfo.environment)
            } catch {
                FileOutput.standardError.write("configuration error: \(error) (or give --proxy)\n")
                throw ExitCode(2)
            }
        }
        let result = await send.run(prepared)
        for line in result.lines { FileOutput.standardOutput.write(line + "\n") }
        if result.exitCode != 0 { throw ExitCode(result.exitCode) }
    }
}

extension APNsEnvironment: ExpressibleByArgument {}
extension APNsPushType: ExpressibleByArgument {}
