import APNs
import ArgumentParser
import Foundation

/// The credential flags `send` and `channels` share: a `.p8` key with its team and key ids, a
/// PKCS#12 bundle, or a PEM certificate with its key; a password from an environment variable.
struct CredentialFlags: ParsableArguments {
    @Option(
        name: .customLong("team-id"),
        help: ArgumentHelp("The Apple developer team id (10 characters), with --key-file.", valueName: "ID"))
    var teamID: String?
    @Option(
        name: .customLong("key-id"),
        help: ArgumentHelp("The signing key's id (10 characters, in the .p8's name), with --key-file.", valueName: "ID")
    )
    var keyID: String?
    @Option(
        name: .customLong("key-file"),
        help: ArgumentHelp("The .p8 signing key (token authentication).", valueName: "FILE"))
    var keyFile: String?
    @Option(name: .customLong("cert-file"), help: ArgumentHelp("Client certificate, PEM.", valueName: "FILE"))
    var certificateFile: String?
    @Option(name: .customLong("cert-key-file"), help: ArgumentHelp("Its private key, PEM.", valueName: "FILE"))
    var certificateKeyFile: String?
    @Option(name: .customLong("p12-file"), help: ArgumentHelp("Client identity as PKCS#12.", valueName: "FILE"))
    var pkcs12File: String?
    @Option(
        name: [.customLong("password-env"), .customLong("p12-password-env")],
        help: ArgumentHelp(
            "Environment variable holding the PKCS#12's or an encrypted key's password.", valueName: "NAME"))
    var passwordVariable: String?

    /// More than one kind given is a usage error (exit 2).
    func checkOne() throws {
        let kinds = [keyFile != nil, pkcs12File != nil, certificateFile != nil || certificateKeyFile != nil]
        if kinds.filter({ $0 }).count > 1 {
            throw ValidationError("give one credential: --key-file, --p12-file, or --cert-file with --cert-key-file")
        }
        // Unset, the password would be empty, and the bundle fail to open with OpenSSL's words.
        if let passwordVariable, ProcessInfo.processInfo.environment[passwordVariable] == nil {
            throw ValidationError("--password-env: the environment variable \(passwordVariable) is not set")
        }
    }

    var password: String? { passwordVariable.flatMap { ProcessInfo.processInfo.environment[$0] } }

    func credential() throws -> APNsCredential {
        try APNsCredential.load(
            keyFile: keyFile, teamID: teamID, keyID: keyID, certificateFile: certificateFile,
            certificateKeyFile: certificateKeyFile, pkcs12File: pkcs12File, password: password)
    }
}
