/// The stream budget of one HTTP/2 connection to APNs, kept apart from the I/O so its rules can be
/// tested alone.
///
/// - Until the server's first SETTINGS frame, one stream (nothing is known yet).
/// - Then the server's MAX_CONCURRENT_STREAMS, re-read on every SETTINGS frame: APNs changes it
///   mid-connection (it drops to 1 after rejections, rises after successes).
/// - With token authentication, one stream until a request with our token succeeded (Apple: "APNs
///   allows only one stream until you post a request with a valid authentication token").
/// - Never more than the configured cap; none after GOAWAY or once closing.
struct APNsHTTP2StateMachine {
    enum Phase: Equatable {
        case starting
        case ready
        /// GOAWAY received (or sent): streams at or below `lastStreamID` may finish, nothing new starts.
        case goingAway(lastStreamID: Int32)
        case closed
    }

    private(set) var phase = Phase.starting
    private(set) var remoteMaxConcurrentStreams: UInt32?
    private(set) var authorizedSuccessSeen: Bool
    let configuredMaximum: Int
    /// Streams submitted to nghttp2 and not yet closed.
    private(set) var openStreams = 0

    init(configuredMaximum: Int, tokenAuthentication: Bool) {
        self.configuredMaximum = max(1, configuredMaximum)
        self.authorizedSuccessSeen = !tokenAuthentication
    }

    /// How many streams may be open at once right now.
    var capacity: Int {
        switch phase {
        case .goingAway, .closed: return 0
        case .starting, .ready: break
        }
        guard let remote = remoteMaxConcurrentStreams else { return 1 }
        var limit = min(configuredMaximum, Int(clamping: remote))
        if !authorizedSuccessSeen { limit = min(limit, 1) }
        return limit
    }

    /// Whether one more stream may be opened now.
    var canOpenStream: Bool { openStreams < capacity }

    enum SettingsAction: Equatable {
        /// The first SETTINGS: the connection is ready.
        case becameReady(capacity: Int)
        case capacityChanged(capacity: Int)
        case none
    }

    mutating func receivedSettings(maxConcurrentStreams: UInt32) -> SettingsAction {
        let before = capacity
        remoteMaxConcurrentStreams = maxConcurrentStreams
        if phase == .starting {
            phase = .ready
            return .becameReady(capacity: capacity)
        }
        return capacity == before ? .none : .capacityChanged(capacity: capacity)
    }

    mutating func streamOpened() {
        openStreams += 1
    }

    /// - Returns: the new capacity if an answer that proves the token lifted the one-stream rule.
    mutating func streamClosed(status: Int?) -> Int? {
        openStreams -= 1
        if let status, Self.provesToken(status), !authorizedSuccessSeen {
            authorizedSuccessSeen = true
            return capacity
        }
        return nil
    }

    /// APNs checks the provider token before anything else: any answer but 403 (the token refused)
    /// or 429 (it may be TooManyProviderTokenUpdates) proves it, a 400 BadDeviceToken or a 410 as
    /// well as a 200. A 5xx proves nothing.
    static func provesToken(_ status: Int) -> Bool {
        (200..<500).contains(status) && status != 403 && status != 429
    }

    enum GoAwayAction: Equatable {
        /// Streams above `lastStreamID` were not processed; close when the rest finished.
        case drain(lastStreamID: Int32)
        case none
    }

    mutating func receivedGoAway(lastStreamID: Int32) -> GoAwayAction {
        switch phase {
        case .closed: return .none
        case .goingAway(let previous):
            phase = .goingAway(lastStreamID: min(previous, lastStreamID))
        case .starting, .ready:
            phase = .goingAway(lastStreamID: lastStreamID)
        }
        return .drain(lastStreamID: lastStreamID)
    }

    var isGoingAwayOrClosed: Bool {
        switch phase {
        case .goingAway, .closed: true
        case .starting, .ready: false
        }
    }

    /// Whether a going-away connection has nothing left to wait for.
    var isDrained: Bool {
        if case .goingAway = phase { return openStreams == 0 }
        return false
    }

    mutating func closed() {
        phase = .closed
    }
}
