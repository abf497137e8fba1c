import APNs
import ArgumentParser
import Foundation
import Worker

/// `apns-worker send`: one notification, for checking credentials and tokens by hand.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send one notification and print APNs' answer.",
        discussion: """
            The notification comes from flags, or from a notification event file (--event). Exit \
            status: 0 on 200, 1 when APNs (or a local rule) rejected it, 2 for usage, configuration \
            and connection errors.
            """
    )

    @Option(name: .long, help: "production or development.")
    var environment: APNsEnvironment = .production
    @Option(name: .long, help: "Override the environment's host (the simulator, a proxy).")
    var host: String?
    @Option(name: .long, help: "443 (default) or 2197; anything for the simulator.")
    var port: Int = APNsEnvironment.defaultPort
    @Option(name: .customLong("ca-file"), help: ArgumentHelp("Trust these roots (PEM) instead of the system store.", valueName: "FILE"))
    var caFile: String?
    @Option(name: .customLong("team-id")) var teamID: String?
    @Option(name: .customLong("key-id")) var keyID: String?
    @Option(name: .customLong("key-file"), help: ArgumentHelp("The .p8 signing key (token authentication).", valueName: "FILE"))
    var keyFile: String?
    @Option(name: .customLong("cert-file"), help: ArgumentHelp("Client certificate, PEM.", valueName: "FILE"))
    var certificateFile: String?
    @Option(name: .customLong("cert-key-file"), help: ArgumentHelp("Its private key, PEM.", valueName: "FILE"))
    var certificateKeyFile: String?
    @Option(name: .customLong("p12-file"), help: ArgumentHelp("Client identity as PKCS#12.", valueName: "FILE"))
    var pkcs12File: String?
    @Option(name: .customLong("p12-password-env"), help: ArgumentHelp("Environment variable holding the PKCS#12 password.", valueName: "NAME"))
    var pkcs12PasswordVariable: String?
    @Option(name: .long) var topic: String?
    @Option(name: .customLong("push-type")) var pushType: APNsPushType = .alert
    @Option(name: .long) var priority: Int?
    @Option(name: .long, help: "apns-expiration: UNIX seconds, 0 = do not store.") var expiration: Int64?
    @Option(name: .customLong("collapse-id")) var collapseID: String?
    @Option(name: .customLong("apns-id")) var apnsID: String?
    @Option(name: .customLong("device-token")) var deviceToken: String?
    @Option(name: .long, help: ArgumentHelp("The JSON payload.", valueName: "JSON")) var payload: String?
    @Option(name: .long, help: ArgumentHelp("A notification event file (the worker's input format).", valueName: "FILE"))
    var event: String?

    func validate() throws {
        if event == nil {
            guard topic != nil, deviceToken != nil, payload != nil else {
                throw ValidationError("give --topic, --device-token and --payload, or --event FILE")
            }
        }
        if let priority, APNsPriority(rawValue: priority) == nil { throw ValidationError("--priority must be 10, 5 or 1") }
    }

    func run() async throws {
        var send = APNsOneShotSend()
        send.environment = environment
        send.host = host
        send.port = port
        send.caFile = caFile
        send.teamID = teamID
        send.keyID = keyID
        send.keyFile = keyFile
        send.certificateFile = certificateFile
        send.certificateKeyFile = certificateKeyFile
        send.pkcs12File = pkcs12File
        send.pkcs12Password = pkcs12PasswordVariable.flatMap { ProcessInfo.processInfo.environment[$0] } ?? ""
        send.topic = topic ?? ""
        send.pushType = pushType
        send.priority = priority.flatMap(APNsPriority.init(rawValue:))
        send.expiration = expiration
        send.collapseID = collapseID
        send.apnsID = apnsID
        send.deviceToken = deviceToken ?? ""
        send.payload = payload ?? ""
        var prepared: APNsNotification?
        if let event {
            do {
                let decoded = try EventFile.notification(at: event)
                prepared = decoded.notification
                send.environment = decoded.environment
            } catch {
                FileOutput.standardError.write("\(error)\n")
                throw ExitCode(1)
            }
        }
        let result = await send.run(prepared)
        for line in result.lines { FileOutput.standardOutput.write(line + "\n") }
        if result.exitCode != 0 { throw ExitCode(result.exitCode) }
    }
}

extension APNsEnvironment: ExpressibleByArgument {}
extension APNsPushType: ExpressibleByArgument {}
