import RTMServer

/// `rtm serve`'s durability and retention settings (`ServeSetting.store`) on the server's
/// configuration; their ranges are checked as they are read.
extension ServeSettingValues {
    func applyStore(to config: inout ServerConfiguration) throws(ServeSettingError) {
        config.storeFullSync = flag(.storeFullSync)
        config.userMessageCap = whole(.userMessageCap)
        config.userMessageMaxAge = Self.seconds(number(.userMessageMaxAgeHours) * 3600)
        config.userMessageResendWindow = Self.seconds(number(.userMessageResendWindow))
        config.publishResendWindow = Self.seconds(number(.publishResendWindow))
        config.userMessageCommitDelay = Self.seconds(number(.userMessageCommitDelayMs) / 1000)
        config.channelReplayWindow = Self.seconds(number(.channelReplayWindow))
        config.channelReplayMax = whole(.channelReplayMax)
        let retention = number(.historyRetentionHours)
        config.historyRetention = retention == 0 ? nil : Self.seconds(retention * 3600)
    }
}
