import RTMProtocol

/// What a connection has read and not yet run, and what reading carries from one frame to the
/// next: the publishes and user messages of the current read batch (run together when the read
/// ends, `ConnectionHandler+Publish`), the inputs held in order while the authorization hook is
/// asked (`ConnectionHandler+Hook`), the request being run (its refusals are counted by its
/// type), and the decode caches of a stream of messages to one channel or receiver.
///
/// A value owned by the connection's handler, confined to its event loop.
struct ConnectionIntake {
    /// The current read delivered at least one whole frame (stamped when the read completes).
    var wholeFrame = false
    /// Publishes of the current read batch (binary, and JSON ones the fast reader took).
    var publishes: [ConnectionHandler.PendingPublish] = []
    /// Binary user messages of the current read batch (one hop to the mailbox for all).
    var userSends: [UserMailbox.Submission] = []
    /// Inputs that arrived while the authorization hook was being asked, in order; nil: not
    /// asking.
    var held: [HeldInput]?
    /// The type of the request being run, which its refusals are counted by
    /// (`rtm_requests_refused_total`); replies that come later name their request's type.
    var operation = RefusalKey.unknownOperation
    /// The last receiver of a binary user message: its id's bytes and validation result.
    var lastUserReceiver: (bytes: [UInt8], name: String, problem: String?)?
    /// The channel of the last publish the gate passed, since the read batch began and the
    /// session's grants last changed: a run of publishes to one channel is decided once.
    var passedChannel: String?
    /// The last channel published to: its name's bytes and validation result, to skip
    /// re-validating and re-allocating the name for every message of a stream.
    var lastPublishChannel: (bytes: [UInt8], name: String, problem: String?)?
    /// The JSON publish `ok` reply template of the last channel epoch answered (made once per
    /// epoch, not once per reply).
    var okTemplate: PublishOKTemplate?
}
