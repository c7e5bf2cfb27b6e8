// The fault proxy lives in its own module (the `rtm` binary's outage bench uses it too);
// tests keep reaching it through this one.
@_exported import RTMFaultProxy
