import DequeModule
import NIOCore
import RTMProtocol

/// The requests of one connection owner (`ClientCore` for the MESSAGE connection, `StreamCore`
/// for a STREAM connection) that await their reply: queued while the link is not up, or
/// sent on the current connection. A plain value confined to the owner's event loop; the owner
/// schedules each request's timeout and decides what happens to sent requests when a
/// connection dies.
struct PendingRequests {
    struct Request {
        var frame: Frame
        let operation: String
        let promise: EventLoopPromise<Frame>
        var timeout: Scheduled<Void>?
        /// Internal requests (restore) are not sent again when a connection dies.
        var isInternal = false
        /// How often the server refused it with a reason to send it again
        /// (`ClientCore.resendsRefusal`), and the last reason given.
        var refusals = 0
        var lastRefusal: String?
    }

    /// The pause before a refused request is sent again: 250 ms, doubling with each refusal,
    /// at most 2 s (a cluster's database outage refuses every publish until it ends).
    static func resendDelay(after refusals: Int) -> TimeAmount {
        .milliseconds(min(2_000, 250 << min(refusals, 3)))
    }

    private var requests: [UInt64: Request] = [:]
    private var queued: Deque<UInt64> = []
    private var sent: Set<UInt64> = []

    /// Adds a new request and says whether to send it now: on a connected link, and only when
    /// no request waits in the queue before it (M-3: one publisher's order holds through a
    /// refused publish waiting to be sent again, or a reconnection), except the SDK's own
    /// restore requests (internal), which go at once, before the queue. Otherwise it is queued
    /// behind the others.
    mutating func admit(_ request: Request, id: UInt64, connected: Bool) -> Bool {
        let now = connected && (request.isInternal || queued.isEmpty)
        requests[id] = request
        if now { sent.insert(id) } else { queued.append(id) }
        return now
    }

    /// A request the server refused, to be sent again (`ClientCore.resendsRefusal`): queued in
    /// the order the application made it, before any request made after it.
    mutating func requeue(_ request: Request, id: UInt64) {
        requests[id] = request
        sent.remove(id)
        queued.insert(id, at: queued.firstIndex { $0 > id } ?? queued.endIndex)
    }

    /// Takes a request out (its timeout fired): nil if it was already answered.
    mutating func remove(_ id: UInt64) -> Request? {
        sent.remove(id)
        queued.removeAll { $0 == id }
        return requests.removeValue(forKey: id)
    }

    /// Takes out request `id` (its reply arrived): nil if it is not pending.
    mutating func take(_ id: UInt64) -> Request? {
        sent.remove(id)
        return requests.removeValue(forKey: id)
    }

    /// The queued requests' frames, oldest first, now counted as sent.
    mutating func dequeue() -> [Frame] {
        var frames: [Frame] = []
        while let id = queued.popFirst() {
            guard let request = requests[id] else { continue }
            sent.insert(id)
            frames.append(request.frame)
        }
        return frames
    }

    /// The connection died: the requests it carried go back to the front of the queue, oldest
    /// first, except internal ones, which are taken out and returned.
    mutating func requeueSent() -> [Request] {
        var again: [UInt64] = []
        var dropped: [Request] = []
        for id in sent.sorted() {
            guard let request = requests[id] else { continue }
            if request.isInternal {
                requests[id] = nil
                dropped.append(request)
            } else {
                again.append(id)
            }
        }
        sent.removeAll()
        queued.insert(contentsOf: again, at: 0)
        return dropped
    }

    /// Takes out the requests the dead connection carried (`all`: every request), oldest first.
    mutating func takeSent(all: Bool) -> [Request] {
        let ids = all ? Array(requests.keys) : Array(sent)
        sent.removeAll()
        if all { queued.removeAll() }
        return ids.sorted().compactMap { requests.removeValue(forKey: $0) }
    }

    // Promises are completed by the owner after these mutations return: a callback may start a
    // new request, which must find the table free.

    /// Completes a request with the server's reply: `ok` succeeds it, anything else fails it with
    /// the reply's code and reason.
    static func complete(_ request: Request, with frame: Frame) {
        request.timeout?.cancel()
        if frame.type == .ok {
            request.promise.succeed(frame)
        } else {
            let code = RTMErrorCode(rawValue: frame.code ?? RTMErrorCode.invalidFrame.rawValue)
            request.promise.fail(RTMError(code, operation: request.operation, frame.reason ?? "rejected by the server"))
        }
    }

    /// Fails requests with `error`, each under its own operation name.
    static func fail(_ requests: [Request], _ error: RTMError) {
        for request in requests {
            request.timeout?.cancel()
            request.promise.fail(RTMError(error.code, operation: request.operation, error.reason))
        }
    }
}
