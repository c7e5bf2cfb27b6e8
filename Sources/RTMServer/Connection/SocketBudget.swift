import Foundation
import NIOConcurrencyHelpers

/// How many client sockets the server holds at once, and the most it accepts: the process's
/// open-file limit less a reserve for its own files (database pools and listening connections,
/// stores, the event loops' descriptors). A process that reaches its limit cannot open a
/// database connection or a file, and the Linux runtime's thread-pool monitor aborts the
/// process when it cannot read `/proc`: so a connection past the budget is closed at once (the
/// client tries another node or backs off) and the node keeps serving the others.
final class SocketBudget: Sendable {
    /// Descriptors kept for the server's own use when the limit comes from the process.
    static let reserve = 128

    let limit: Int
    private let state = NIOLockedValueBox((open: 0, refused: 0, lastWarning: 0.0))

    /// `configured` (`ServerConfiguration.maxConnections`), or the open-file limit less `reserve`.
    init(configured: Int?) {
        if let configured {
            limit = max(1, configured)
        } else {
            var rlim = rlimit()
            // No limit (or none readable): a million, far past what one process serves.
            let soft = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &rlim) == 0 ? Int(clamping: rlim.rlim_cur) : 1 << 20
            limit = max(16, min(soft, 1 << 20) - Self.reserve)
        }
    }

    /// A socket was accepted: false when it is past the budget (close it). `warn` is called at
    /// most once per 10 s with the refusals so far.
    func admit(warn: (Int) -> Void) -> Bool {
        let (admitted, refusals) = state.withLockedValue { state -> (Bool, Int?) in
            guard state.open < limit else {
                state.refused += 1
                let now = Date().timeIntervalSince1970
                guard now - state.lastWarning >= 10 else { return (false, nil) }
                state.lastWarning = now
                return (false, state.refused)
            }
            state.open += 1
            return (true, nil)
        }
        if let refusals { warn(refusals) }
        return admitted
    }

    /// An admitted socket closed.
    func release() { state.withLockedValue { $0.open -= 1 } }

    /// Sockets open now.
    var open: Int { state.withLockedValue { $0.open } }
}
