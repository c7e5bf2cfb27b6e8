enum _PlaceholderRTMTestSupport {}
