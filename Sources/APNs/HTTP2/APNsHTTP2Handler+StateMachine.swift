import NIOCore

extension APNsHTTP2Handler {
    /// One HTTP/2 connection to APNs without its I/O: its stream budget, its liveness (PING) and its
    /// timers, so the rules can be tested alone. `APNsHTTP2Handler` owns it on the connection's event
    /// loop, tells it what happened, and does what it returns.
    ///
    /// The stream budget:
    /// - Until the server's first SETTINGS frame, one stream (nothing is known yet).
    /// - Then the server's MAX_CONCURRENT_STREAMS, re-read on every SETTINGS frame: APNs changes it
    ///   mid-connection (it drops to 1 after rejections, rises after successes).
    /// - With token authentication, one stream until a request with our token succeeded (Apple: "APNs
    ///   allows only one stream until you post a request with a valid authentication token").
    /// - Never more than the configured cap; none after GOAWAY or once closed.
    ///
    /// The timers (`Timer`): the setup timeout runs from the moment the byte stream exists until the
    /// first SETTINGS; the PING check runs every `pingInterval` once the session exists, and sends a
    /// PING after that long without reading anything; the PING timeout runs from a PING to its ACK; the
    /// deadline timer is armed for the earliest deadline of the requests the connection holds. The
    /// machine says when each is armed and cancelled; the handler keeps the scheduled tasks.
    struct StateMachine {
        /// What every phase but `closed` has.
        struct Open {
            /// Streams submitted to nghttp2 and not yet closed.
            var openStreams = 0
            /// A request with our provider token was answered (always true with a certificate).
            var authorized: Bool
            /// The last time anything was read from the server.
            var lastRead: NIODeadline
            /// A PING was sent and its ACK has not come back.
            var pingOutstanding = false
            /// The deadline the deadline timer is armed for.
            var deadlineArmedAt: NIODeadline?
        }

        enum State {
            /// Connected, before the server's first SETTINGS. `setupArmed`: the setup timeout runs.
            case starting(Open, setupArmed: Bool)
            /// The server's SETTINGS arrived; `remoteMaximum` is its latest MAX_CONCURRENT_STREAMS.
            case ready(Open, remoteMaximum: UInt32)
            /// GOAWAY received: streams at or below `lastStreamID` may finish, nothing new starts.
            case goingAway(Open, lastStreamID: Int32)
            /// The channel closed: nothing is open, no timer runs.
            case closed
        }

        enum Timer: CaseIterable {
            case setup
            case pingCheck
            case pingTimeout
            case deadline
        }

        enum TimerAction: Equatable {
            case schedule(Timer, at: NIODeadline)
            case cancel(Timer)
        }

        private(set) var state: State
        let configuredMaximum: Int
        private let settings: APNsHTTP2Settings

        init(settings: APNsHTTP2Settings, now: NIODeadline = .now()) {
            self.settings = settings
            self.configuredMaximum = max(1, settings.maximumStreams)
            self.state = .starting(Open(authorized: !settings.tokenAuthentication, lastRead: now), setupArmed: false)
        }

        // MARK: Stream budget

        /// How many streams may be open at once right now.
        var capacity: Int {
            switch state {
            case .starting: return 1
            case .ready(let open, let remote):
                let limit = min(configuredMaximum, Int(clamping: remote))
                return open.authorized ? limit : min(limit, 1)
            case .goingAway, .closed: return 0
            }
        }

        var openStreams: Int {
            switch state {
            case .starting(let open, _), .ready(let open, _), .goingAway(let open, _): open.openStreams
            case .closed: 0
            }
        }

        /// Whether one more stream may be opened now.
        var canOpenStream: Bool { openStreams < capacity }

        enum SettingsAction: Equatable {
            /// The first SETTINGS: the connection is ready, and the setup timeout stops (the handler
            /// cancels `Timer.setup`).
            case becameReady(capacity: Int)
            case capacityChanged(capacity: Int)
            case none
        }

        mutating func receivedSettings(maxConcurrentStreams: UInt32) -> SettingsAction {
            switch state {
            case .starting(let open, _):
                state = .ready(open, remoteMaximum: maxConcurrentStreams)
                return .becameReady(capacity: capacity)
            case .ready(let open, _):
                let before = capacity
                state = .ready(open, remoteMaximum: maxConcurrentStreams)
                return capacity == before ? .none : .capacityChanged(capacity: capacity)
            case .goingAway, .closed:
                return .none
            }
        }

        mutating func streamOpened() {
            update { $0.openStreams += 1 }
        }

        /// - Returns: the new capacity if an answer that proves the token lifted the one-stream rule.
        mutating func streamClosed(status: Int?) -> Int? {
            var proved = false
            update { open in
                open.openStreams -= 1
                if let status, !open.authorized, Self.provesToken(status) {
                    open.authorized = true
                    proved = true
                }
            }
            guard proved, case .ready = state else { return nil }
            return capacity
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
            switch state {
            case .closed:
                return .none
            case .goingAway(let open, let previous):
                state = .goingAway(open, lastStreamID: min(previous, lastStreamID))
            case .starting(let open, _), .ready(let open, _):
                // Leaving `starting` ends the setup timeout too: the server answered.
                state = .goingAway(open, lastStreamID: lastStreamID)
            }
            return .drain(lastStreamID: lastStreamID)
        }

        /// The last stream GOAWAY lets finish, once one arrived.
        var goAwayLastStreamID: Int32? {
            if case .goingAway(_, let last) = state { return last }
            return nil
        }

        var isGoingAwayOrClosed: Bool {
            switch state {
            case .goingAway, .closed: true
            case .starting, .ready: false
            }
        }

        /// Whether a going-away connection has nothing left to wait for.
        var isDrained: Bool {
            if case .goingAway(let open, _) = state { return open.openStreams == 0 }
            return false
        }

        /// The channel closed. Returns the timers to cancel: all of them (cancelling one that is not
        /// armed does nothing), so that no task outlives the connection.
        mutating func closed() -> [Timer] {
            state = .closed
            return Timer.allCases
        }

        // MARK: Timers

        /// The byte stream to APNs exists (TCP connected and, through a proxy, tunnelled): the TLS and
        /// HTTP/2 setup must finish within `setupTimeout`. Once only.
        mutating func connected(now: NIODeadline) -> TimerAction? {
            guard case .starting(let open, setupArmed: false) = state else { return nil }
            state = .starting(open, setupArmed: true)
            return .schedule(.setup, at: now + settings.setupTimeout)
        }

        /// The setup timeout fired: the error to close with, unless the server answered in time.
        func setupTimedOut() -> APNsClientError? {
            guard case .starting = state else { return nil }
            let milliseconds = settings.setupTimeout.nanoseconds / 1_000_000
            return APNsClientError(
                .connectFailed, "no TLS + HTTP/2 setup within \(milliseconds) ms", mayHaveReachedAPNs: false)
        }

        /// TLS is up and the HTTP/2 session exists: idleness is watched from now on.
        mutating func sessionStarted(now: NIODeadline) -> TimerAction? {
            guard !isClosed else { return nil }
            update { $0.lastRead = now }
            return .schedule(.pingCheck, at: now + settings.pingInterval)
        }

        /// Bytes arrived from the server (called on every read: only a store).
        mutating func received(now: NIODeadline) {
            update { $0.lastRead = now }
        }

        enum PingAction: Equatable {
            /// Idle for a whole interval: send a PING, arm its timeout, check again later.
            case sendPing(timeoutAt: NIODeadline, nextCheckAt: NIODeadline)
            /// Not idle (or a PING is already out): check again later.
            case checkAgain(at: NIODeadline)
            /// Closed: no more checks.
            case none
        }

        /// The PING check fired.
        mutating func pingCheckDue(now: NIODeadline) -> PingAction {
            guard !isClosed else { return .none }
            let interval = settings.pingInterval
            let next = now + interval
            var send = false
            update { open in
                if !open.pingOutstanding, now - open.lastRead >= interval {
                    open.pingOutstanding = true
                    send = true
                }
            }
            return send ? .sendPing(timeoutAt: now + settings.pingTimeout, nextCheckAt: next) : .checkAgain(at: next)
        }

        /// The PING's ACK arrived: its timeout stops.
        mutating func pingAcknowledged() -> TimerAction? {
            var wasOutstanding = false
            update { open in
                wasOutstanding = open.pingOutstanding
                open.pingOutstanding = false
            }
            return wasOutstanding ? .cancel(.pingTimeout) : nil
        }

        /// The PING timeout fired: the error to close with, unless the ACK came first.
        func pingTimedOut() -> APNsClientError? {
            switch state {
            case .starting(let open, _), .ready(let open, _), .goingAway(let open, _):
                guard open.pingOutstanding else { return nil }
                let milliseconds = settings.pingTimeout.nanoseconds / 1_000_000
                return APNsClientError(
                    .pingTimeout, "no PING answer within \(milliseconds) ms", mayHaveReachedAPNs: true)
            case .closed:
                return nil
            }
        }

        /// A request with this deadline was queued: the deadline timer is armed for it if it is the
        /// earliest. One timer per connection, not one per request; with one request timeout per
        /// client, deadlines arrive in order, so a healthy connection re-arms once per timeout period.
        mutating func requestQueued(deadline: NIODeadline) -> TimerAction? {
            var arm = false
            update { open in
                if let armed = open.deadlineArmedAt, armed <= deadline { return }
                open.deadlineArmedAt = deadline
                arm = true
            }
            return arm ? .schedule(.deadline, at: deadline) : nil
        }

        /// The deadline timer fired, the handler failed every request past its deadline, and
        /// `earliest` is the earliest deadline left (if any): the timer is armed for it.
        mutating func deadlinesExpired(earliestLeft earliest: NIODeadline?) -> TimerAction? {
            update { $0.deadlineArmedAt = earliest }
            guard !isClosed, let earliest else { return nil }
            return .schedule(.deadline, at: earliest)
        }

        // MARK: Internals

        private var isClosed: Bool {
            if case .closed = state { return true }
            return false
        }

        /// Changes what every open phase has; nothing once closed.
        private mutating func update(_ change: (inout Open) -> Void) {
            switch state {
            case .starting(var open, let armed):
                change(&open)
                state = .starting(open, setupArmed: armed)
            case .ready(var open, let remote):
                change(&open)
                state = .ready(open, remoteMaximum: remote)
            case .goingAway(var open, let last):
                change(&open)
                state = .goingAway(open, lastStreamID: last)
            case .closed:
                break
            }
        }
    }
}
