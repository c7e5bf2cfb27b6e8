import RTMServer

/// `rtm serve`'s authorization hook (`ServeSetting.authHook`, README "Security model"): the
/// app's backend, asked over HTTP whether a login, a subscribe or a publish may go ahead.
extension ServeSettingValues {
    func applyAuthHook(to config: inout ServerConfiguration) throws(ServeSettingError) {
        guard let url = string(.authHookUrl) else {
            for setting in [ServeSetting.authHookSecret, .authHookConnect] where isGiven(setting) {
                throw .together([setting, .authHookUrl], "go together (without a hook there is nobody to ask)")
            }
            return
        }
        guard let secret = string(.authHookSecret), !secret.isEmpty else {
            throw .together([.authHookUrl, .authHookSecret], "go together (the hook's requests are signed with a non-empty secret)")
        }
        var hook = AuthorizationHookConfiguration(url: url, secret: secret)
        if let connect = string(.authHookConnect) {
            guard let mode = HookFailureMode(rawValue: connect) else { throw invalid(.authHookConnect) }
            hook.connect = mode
        }
        hook.maxConcurrentRequests = whole(.authHookConcurrency)
        hook.timeout = Self.seconds(number(.authHookTimeout))
        hook.cacheTTL = Self.seconds(number(.authHookCache))
        hook.breakerFailures = whole(.authHookBreakerFailures)
        hook.breakerOpenFor = Self.seconds(number(.authHookBreakerOpen))
        config.authorizationHook = hook
    }
}
