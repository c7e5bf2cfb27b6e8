import NIOCore
import RTMProtocol

extension ConnectionHandler {
    /// Records why the connection ends (`rtm_disconnects_total`); the first cause wins (a
    /// client's close frame is answered with a close frame, which is not a second cause).
    func noteEnd(_ reason: DisconnectReason) {
        if endReason == nil { endReason = reason }
    }

    /// A login request was answered with an error (`rtm_logins_total{result="rejected"}`,
    /// `rtm_login_rejections_total{code}`).
    func noteLoginRejected(code: Int?) {
        hub.metrics.loginRejected(RTMErrorCode(rawValue: code ?? RTMErrorCode.loginRejected.rawValue))
    }
}
