import APNs

/// `apns:` — plain data; the pipeline maps it to the APNs client.
package struct APNsSettings: Sendable, Hashable {
    /// 8: at APNs' round trips of 100 to 200 ms, 4 connections' streams (at most 1,000 each) held
    /// `delivery.maxInFlight`'s 10,000 events back (docs/performance.md).
    package var connectionsPerCredential: Int = 8
    package var requestTimeout: Duration = .seconds(15)
    /// Threads that run every APNs connection's I/O, TLS and HTTP/2, and the answers' callbacks;
    /// `nil`: one per core, at most 4.
    package var eventLoopThreads: Int? = nil
    /// Extra trust anchors (PEM) on top of the system store, e.g. a TLS-inspecting egress proxy's
    /// CA or the simulator's; `nil`: the system store alone.
    package var caFile: String? = nil
    /// A device push whose event sets no `collapseId` is sent with one made from its event id, so
    /// that if it is pushed again (the floor after a crash: a push whose answer never came back)
    /// the device shows the second in place of the first, not both. Off by default: it changes
    /// what reaches APNs, and an app may use collapse ids of its own meaning.
    package var collapseIdFromEventId = false
    /// The provider-token period (`APNsTokenSchedule`): 30 minutes, Apple's rules. Shorter only for
    /// tests against a simulator whose token windows are scaled the same way (at least 30 s).
    package var tokenPeriod: Duration = .seconds(1800)

    /// How often the key and certificate files are read again, so that a key or certificate replaced
    /// in place (a Kubernetes Secret updated) is used without a restart; `nil` (`0s`): never.
    package var credentialReloadInterval: Duration? = .seconds(10)
    /// After a credential is reloaded, one of each pool's connections opened with the one before is
    /// replaced per interval (the first at a random point within one).
    package var connectionReplaceInterval: Duration = .seconds(15)

    /// The token schedule `tokenPeriod` makes.
    package var tokenSchedule: APNsTokenSchedule {
        APNsTokenSchedule(periodSeconds: tokenPeriod.components.seconds)
    }

    /// `proxy`: how APNs connections reach the internet. `environment` (the default) tunnels through
    /// `HTTPS_PROXY` (or `https_proxy`) unless `NO_PROXY` (or `no_proxy`) exempts the host, as curl
    /// and Go do; `none` connects directly; a URL names the proxy for every APNs host.
    package var proxy: ProxySetting = .environment

    package enum ProxySetting: Sendable, Hashable {
        case environment
        case none
        case url(APNsProxy)
    }

    /// The proxy a connection to `host` goes through, if any; `environment` is the process's.
    /// Throws when `HTTPS_PROXY` is not a proxy URL (the message names the variable, not its value).
    package func proxy(forHost host: String, environment: [String: String]) throws -> APNsProxy? {
        switch proxy {
        case .none: return nil
        case .url(let proxy): return proxy
        case .environment:
            do {
                return try Self.environmentProxy(forHost: host, environment: environment)
            } catch {
                throw ConfigurationError(
                    code: .invalidValue, keyPath: "apns.proxy", environmentVariable: error.variable,
                    message: "\(error.problem) (apns.proxy is environment; set it to none to ignore \(error.variable))")
            }
        }
    }

    /// The proxy `HTTPS_PROXY` (or `https_proxy`) names for `host`, unless `NO_PROXY` (or
    /// `no_proxy`) exempts it, as curl and Go read them; `nil` when none applies. The worker's
    /// `apns.proxy: environment` and `apns-worker send` and `channels` without `--proxy` use it.
    package static func environmentProxy(
        forHost host: String, environment: [String: String]
    ) throws(EnvironmentProxyError) -> APNsProxy? {
        guard
            let (name, text) = ["HTTPS_PROXY", "https_proxy"].lazy.compactMap({ name in
                environment[name].map { (name, $0) }
            }).first, !text.isEmpty
        else { return nil }
        let exemptions = environment["NO_PROXY"] ?? environment["no_proxy"] ?? ""
        if APNsProxy.isExempt(host, noProxy: exemptions) { return nil }
        do {
            return try APNsProxy(url: text)
        } catch {
            throw EnvironmentProxyError(variable: name, problem: "\(error)")
        }
    }

    /// A proxy variable that holds no proxy URL this client can use: which one, and why (never its
    /// value, which may carry a password).
    package struct EnvironmentProxyError: Error, CustomStringConvertible {
        package let variable: String
        package let problem: String
        package var description: String { "\(variable): \(problem)" }
    }

    /// What a connection verifies APNs' certificate against: the system store, plus `caFile`.
    package var tlsTrust: APNsTLSConfiguration.Trust { caFile.map { .systemAnd(caFile: $0) } ?? .system }
    package var endpoints: Endpoints = Endpoints()
    /// At least one; chosen by topic, first match wins.
    package var credentials: [CredentialSettings]

    package init(credentials: [CredentialSettings]) { self.credentials = credentials }

    package struct Endpoint: Sendable, Hashable {
        package var host: String
        package var port: Int

        package init(host: String, port: Int = 443) {
            self.host = host
            self.port = port
        }
    }

    /// Apple's hosts unless overridden (the simulator, a proxy).
    package struct Endpoints: Sendable, Hashable {
        package var production = Endpoint(host: "api.push.apple.com")
        package var development = Endpoint(host: "api.sandbox.push.apple.com")

        package init() {}
    }

    /// The first credential one of whose patterns matches `topic` and that serves `environment`
    /// (any, when `nil`), in file order.
    package func credential(forTopic topic: String, environment: APNsEnvironment? = nil) -> CredentialSettings? {
        credentials.first { $0.matches(topic: topic) && (environment.map($0.serves) ?? true) }
    }
}

/// One entry of `apns.credentials`.
package struct CredentialSettings: Sendable, Hashable {
    /// Names the credential in logs, metrics (`credential` label) and readiness.
    package var name: String
    /// Exact topics, or prefixes ending in `.*` (`com.example.app.*` matches `com.example.app.voip`
    /// but not `com.example.app` itself: list both when both are wanted).
    package var topics: [String]
    package var kind: Kind
    /// `environment`: the one APNs environment this credential serves (a sandbox-only certificate,
    /// a token key scoped to one environment); `nil`: both. Events for the other environment look
    /// further down the list.
    package var environment: APNsEnvironment?
    /// Where the credential is written (`apns.credentials[1]` and its line), for problems found
    /// after loading (a key file that cannot be opened, a certificate that expired).
    package var keyPath: String?
    package var line: Int?

    package init(name: String, topics: [String], kind: Kind, environment: APNsEnvironment? = nil) {
        self.name = name
        self.topics = topics
        self.kind = kind
        self.environment = environment
    }

    /// Whether events for `environment` may use this credential.
    package func serves(_ environment: APNsEnvironment) -> Bool {
        self.environment == nil || self.environment == environment
    }

    package enum Kind: Sendable, Hashable {
        case token(TokenCredentialSettings)
        case certificate(CertificateCredentialSettings)
    }

    /// An exact topic (no `*`), or a non-empty prefix followed by `.*` and no other `*`.
    static func isValidPattern(_ pattern: String) -> Bool {
        guard pattern.contains("*") else { return true }
        return pattern.hasSuffix(".*") && pattern.count > 2 && !pattern.dropLast(2).contains("*")
    }

    package func matches(topic: String) -> Bool {
        topics.contains { pattern in
            if pattern.hasSuffix(".*") {
                let prefix = pattern.dropLast(1)  // keeps the dot: "com.example.app."
                return topic.hasPrefix(prefix) && topic.utf8.count > prefix.utf8.count
            }
            return pattern == topic
        }
    }
}

/// Token (JWT, ES256) authentication: one .p8 key of one team.
package struct TokenCredentialSettings: Sendable, Hashable {
    package var teamID: String
    package var keyID: KeyIDSource
    package var key: KeySource

    package init(teamID: String, keyID: String, key: KeySource) {
        self.init(teamID: teamID, keyID: .value(keyID), key: key)
    }

    package init(teamID: String, keyID: KeyIDSource, key: KeySource) {
        self.teamID = teamID
        self.keyID = keyID
        self.key = key
    }

    /// Where the key's 10-character id is: in the configuration, or in a file beside the key (read
    /// again with it, so that a rotation to a new key, which always has a new id, needs no restart).
    package enum KeyIDSource: Sendable, Hashable, CustomStringConvertible {
        /// `keyId`.
        case value(String)
        /// `keyIdFile`: a path; its text, surrounding white space removed.
        case file(String)

        package var description: String {
            switch self {
            case .value(let id): id
            case .file(let path): "from \(path)"
            }
        }
    }

    /// Where the PEM text of the signing key is.
    package enum KeySource: Sendable, Hashable {
        /// `keyFile`: a path.
        case file(String)
        /// `keyEnv`: the name of an environment variable holding the PEM text itself.
        case environment(String)
    }
}

/// Certificate (mutual TLS) authentication.
package struct CertificateCredentialSettings: Sendable, Hashable {
    package var source: Source
    /// `passwordEnv`: the environment variable holding the key's or the PKCS#12's password.
    package var passwordEnvironmentVariable: String?

    package init(source: Source, passwordEnvironmentVariable: String? = nil) {
        self.source = source
        self.passwordEnvironmentVariable = passwordEnvironmentVariable
    }

    package enum Source: Sendable, Hashable {
        /// `certificateFile` + `privateKeyFile`, both PEM.
        case pem(certificateFile: String, privateKeyFile: String)
        /// `p12File`.
        case pkcs12(file: String)
    }
}

extension CredentialSettings {
    /// When every pattern of this credential is covered by a pattern of one credential in `earlier`
    /// that serves each environment this one serves (routing takes the first match, so this one
    /// would never be used): that credential's name, and one pattern and the pattern covering it.
    /// A credential partly reachable is left alone.
    func shadowed(by earlier: [CredentialSettings]) -> (credential: String, pattern: String, by: String)? {
        for first in earlier where first.environment == nil || first.environment == environment {
            var example: (String, String)?
            let covered = topics.allSatisfy { pattern in
                guard let by = first.topics.first(where: { Self.pattern($0, covers: pattern) }) else { return false }
                if example == nil { example = (pattern, by) }
                return true
            }
            if covered, let (pattern, by) = example { return (first.name, pattern, by) }
        }
        return nil
    }

    /// Whether every topic `pattern` matches is matched by `cover` (exact topics, or `prefix.*`).
    static func pattern(_ cover: String, covers pattern: String) -> Bool {
        guard cover.hasSuffix(".*") else { return cover == pattern }
        let prefix = cover.dropLast(1)  // "com.example."
        if pattern.hasSuffix(".*") { return pattern.dropLast(1).hasPrefix(prefix) }
        return pattern.hasPrefix(prefix) && pattern.count > prefix.count
    }
}
