import Foundation

/// An HTTP proxy that APNs connections tunnel through with `CONNECT` (corporate egress). TLS runs
/// inside the tunnel, end to end with APNs: the proxy sees only the host name and port, and the
/// server's certificate and host name are verified exactly as without it.
public struct APNsProxy: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// Basic authentication (`Proxy-Authorization`), when both are set.
    public var username: String?
    public var password: String?

    public init(host: String, port: Int, username: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
    }

    public struct ParseError: Error, CustomStringConvertible {
        public let description: String
    }

    /// `http://[user:password@]host[:port]`; the port defaults to 80, user and password are
    /// percent-decoded. Only `http` proxies: the tunnel itself carries TLS.
    public init(url text: String) throws(ParseError) {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            throw ParseError(description: "not a URL (expected http://[user:password@]host[:port])")
        }
        guard scheme == "http" else {
            throw ParseError(description: "scheme '\(scheme)' is not supported: expected an http:// proxy")
        }
        guard let host = components.host, !host.isEmpty else { throw ParseError(description: "the URL has no host") }
        self.init(
            host: host, port: components.port ?? 80, username: components.user?.removingPercentEncoding,
            password: components.password?.removingPercentEncoding)
        if (components.path != "" && components.path != "/") || components.query != nil {
            throw ParseError(description: "a proxy URL has no path or query")
        }
    }

    /// The `Proxy-Authorization` header's value, when credentials are set.
    var authorization: String? {
        guard let username, let password else { return nil }
        return "Basic " + Data("\(username):\(password)".utf8).base64EncodedString()
    }

    /// `http://user:<redacted>@host:port`: never the password.
    public var description: String {
        let user = username.map { $0 + (password == nil ? "" : ":<redacted>") + "@" } ?? ""
        return "http://\(user)\(host):\(port)"
    }

    /// Whether `NO_PROXY`-style `rules` exempt `host`: comma-separated names, each matching the host
    /// itself or, with or without a leading dot, any subdomain; `*` exempts everything.
    public static func isExempt(_ host: String, noProxy rules: String) -> Bool {
        let host = host.lowercased()
        for rule in rules.split(separator: ",") {
            var rule = rule.trimmingCharacters(in: .whitespaces).lowercased()
            if rule.isEmpty { continue }
            if rule == "*" { return true }
            if let colon = rule.lastIndex(of: ":"), !rule.contains("]") { rule = String(rule[..<colon]) }
            if rule.hasPrefix(".") { rule.removeFirst() }
            if host == rule || host.hasSuffix("." + rule) { return true }
        }
        return false
    }
}
