import NIOCore
import RTMProtocol

extension ConnectionHandler {
    /// A login request was answered with an error (`rtm_logins_total{result="rejected"}`,
    /// `rtm_login_rejections_total{code}`).
    func noteLoginRejected(code: Int?) {
        hub.metrics.loginRejected(RTMErrorCode(rawValue: code ?? RTMErrorCode.loginRejected.rawValue))
    }
}
