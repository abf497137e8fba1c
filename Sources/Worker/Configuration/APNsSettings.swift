import APNs

/// `apns:` — plain data; the pipeline maps it to the APNs client.
public struct APNsSettings: Sendable, Hashable {
    public var connectionsPerCredential: Int = 4
    public var requestTimeout: Duration = .seconds(15)
    /// Threads that run every APNs connection's I/O, TLS and HTTP/2, and the answers' callbacks;
    /// `nil`: one per core, at most 4.
    public var eventLoopThreads: Int? = nil
    /// Extra trust anchors (PEM) on top of the system store, e.g. a TLS-inspecting egress proxy's
    /// CA or the simulator's; `nil`: the system store alone.
    public var caFile: String? = nil

    /// `proxy`: how APNs connections reach the internet. `environment` (the default) tunnels through
    /// `HTTPS_PROXY` (or `https_proxy`) unless `NO_PROXY` (or `no_proxy`) exempts the host, as curl
    /// and Go do; `none` connects directly; a URL names the proxy for every APNs host.
    public var proxy: ProxySetting = .environment

    public enum ProxySetting: Sendable, Hashable {
        case environment
        case none
        case url(APNsProxy)
    }

    /// The proxy a connection to `host` goes through, if any; `environment` is the process's.
    /// Throws when `HTTPS_PROXY` is not a proxy URL (the message names the variable, not its value).
    public func proxy(forHost host: String, environment: [String: String]) throws -> APNsProxy? {
        switch proxy {
        case .none: return nil
        case .url(let proxy): return proxy
        case .environment:
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
                throw ConfigurationError(
                    code: .invalidValue, keyPath: "apns.proxy", environmentVariable: name,
                    message: "\(error) (apns.proxy is environment; set it to none to ignore \(name))")
            }
        }
    }

    /// What a connection verifies APNs' certificate against: the system store, plus `caFile`.
    public var tlsTrust: APNsTLSConfiguration.Trust { caFile.map { .systemAnd(caFile: $0) } ?? .system }
    public var endpoints: Endpoints = Endpoints()
    /// At least one; chosen by topic, first match wins.
    public var credentials: [CredentialSettings]

    public init(credentials: [CredentialSettings]) { self.credentials = credentials }

    public struct Endpoint: Sendable, Hashable {
        public var host: String
        public var port: Int

        public init(host: String, port: Int = 443) {
            self.host = host
            self.port = port
        }
    }

    /// Apple's hosts unless overridden (the simulator, a proxy).
    public struct Endpoints: Sendable, Hashable {
        public var production = Endpoint(host: "api.push.apple.com")
        public var development = Endpoint(host: "api.sandbox.push.apple.com")

        public init() {}
    }

    /// The first credential one of whose patterns matches `topic` and that serves `environment`
    /// (any, when `nil`), in file order.
    public func credential(forTopic topic: String, environment: APNsEnvironment? = nil) -> CredentialSettings? {
        credentials.first { $0.matches(topic: topic) && (environment.map($0.serves) ?? true) }
    }
}

/// One entry of `apns.credentials`.
public struct CredentialSettings: Sendable, Hashable {
    /// Names the credential in logs, metrics (`credential` label) and readiness.
    public var name: String
    /// Exact topics, or prefixes ending in `.*` (`com.example.app.*` matches `com.example.app.voip`
    /// but not `com.example.app` itself: list both when both are wanted).
    public var topics: [String]
    public var kind: Kind
    /// `environment`: the one APNs environment this credential serves (a sandbox-only certificate,
    /// a token key scoped to one environment); `nil`: both. Events for the other environment look
    /// further down the list.
    public var environment: APNsEnvironment?

    public init(name: String, topics: [String], kind: Kind, environment: APNsEnvironment? = nil) {
        self.name = name
        self.topics = topics
        self.kind = kind
        self.environment = environment
    }

    /// Whether events for `environment` may use this credential.
    public func serves(_ environment: APNsEnvironment) -> Bool {
        self.environment == nil || self.environment == environment
    }

    public enum Kind: Sendable, Hashable {
        case token(TokenCredentialSettings)
        case certificate(CertificateCredentialSettings)
    }

    /// An exact topic (no `*`), or a non-empty prefix followed by `.*` and no other `*`.
    static func isValidPattern(_ pattern: String) -> Bool {
        guard pattern.contains("*") else { return true }
        return pattern.hasSuffix(".*") && pattern.count > 2 && !pattern.dropLast(2).contains("*")
    }

    public func matches(topic: String) -> Bool {
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
public struct TokenCredentialSettings: Sendable, Hashable {
    public var teamID: String
    public var keyID: String
    public var key: KeySource

    public init(teamID: String, keyID: String, key: KeySource) {
        self.teamID = teamID
        self.keyID = keyID
        self.key = key
    }

    /// Where the PEM text of the signing key is.
    public enum KeySource: Sendable, Hashable {
        /// `keyFile`: a path.
        case file(String)
        /// `keyEnv`: the name of an environment variable holding the PEM text itself.
        case environment(String)
    }
}

/// Certificate (mutual TLS) authentication.
public struct CertificateCredentialSettings: Sendable, Hashable {
    public var source: Source
    /// `passwordEnv`: the environment variable holding the key's or the PKCS#12's password.
    public var passwordEnvironmentVariable: String?

    public init(source: Source, passwordEnvironmentVariable: String? = nil) {
        self.source = source
        self.passwordEnvironmentVariable = passwordEnvironmentVariable
    }

    public enum Source: Sendable, Hashable {
        /// `certificateFile` + `privateKeyFile`, both PEM.
        case pem(certificateFile: String, privateKeyFile: String)
        /// `p12File`.
        case pkcs12(file: String)
    }
}
