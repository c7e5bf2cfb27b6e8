import NIOCore

/// The `0x82` publish-acks frame (PROTOCOL.md §2.3): `count u16`, `count` × (`id u64`,
/// `seq u64`), then the acks' channel epochs (§3.1) as runs to the end of the frame, each
/// `n u16` (≥ 1) and `epoch str8` for the next `n` acks. A reader that stops after the pairs
/// reads the frame as before; a frame that ends after the pairs carries no epochs.
///
/// One read's acks nearly always share one epoch per channel, so a frame costs one run (a few
/// bytes) per channel and epoch, not a string per ack.
extension BinaryFrame {
    /// One acknowledged binary publish.
    public struct PublishAck: Sendable, Equatable {
        /// The publish's request id.
        public var requestID: UInt64
        /// The message's sequence number in the channel (SPEC M-2).
        public var seq: UInt64
        /// The channel epoch `seq` belongs to (the `epoch` of the delivered `0x81` message); nil
        /// when the frame carries no epochs. Two acks with the same `seq` and different epochs
        /// are two different messages.
        public var epoch: String?

        /// An acknowledgement.
        public init(requestID: UInt64, seq: UInt64, epoch: String?) {
            self.requestID = requestID; self.seq = seq; self.epoch = epoch
        }
    }

    /// The acks of one `0x82` frame, gathered in order: the pairs, and their epochs as runs
    /// (consecutive acks of one epoch extend one run, so appending allocates no string).
    public struct PublishAcks: Sendable {
        private var pairs: [(requestID: UInt64, seq: UInt64)] = []
        private var runs: [(count: Int, epoch: String)] = []

        /// No acks.
        public init() {}

        /// Whether there is no ack.
        public var isEmpty: Bool { pairs.isEmpty }
        /// How many acks.
        public var count: Int { pairs.count }

        /// Appends the ack of request `requestID`: message `seq` of channel epoch `epoch`.
        public mutating func append(requestID: UInt64, seq: UInt64, epoch: String) {
            pairs.append((requestID, seq))
            if let last = runs.last, last.count < Int(UInt16.max), last.epoch == epoch {
                runs[runs.count - 1].count += 1
            } else {
                runs.append((1, epoch))
            }
        }

        /// The acks, each with its epoch.
        public var acks: [PublishAck] {
            var out: [PublishAck] = []
            out.reserveCapacity(pairs.count)
            for run in runs {
                for pair in pairs[out.count..<(out.count + run.count)] {
                    out.append(PublishAck(requestID: pair.requestID, seq: pair.seq, epoch: run.epoch))
                }
            }
            return out
        }

        /// The frame's body size.
        public var byteCount: Int {
            runs.reduce(3 + 16 * pairs.count) { $0 + 3 + min($1.epoch.utf8.count, 255) }
        }

        /// Appends the frame's body to `buffer`.
        public func write(into buffer: inout ByteBuffer) {
            buffer.writeInteger(publishAckOp)
            buffer.writeInteger(UInt16(truncatingIfNeeded: pairs.count), endianness: .little)
            for pair in pairs {
                buffer.writeInteger(pair.requestID, endianness: .little)
                buffer.writeInteger(pair.seq, endianness: .little)
            }
            for run in runs {
                buffer.writeInteger(UInt16(run.count), endianness: .little)
                writeShortString(run.epoch, into: &buffer)
            }
        }
    }

    /// Appends a publish-acks frame's body holding `acks` to `buffer`.
    public static func writePublishAcks(into buffer: inout ByteBuffer, _ acks: PublishAcks) {
        acks.write(into: &buffer)
    }

    /// Reads a publish-acks frame's body after the op byte. Epoch runs, when present, must
    /// cover every ack exactly.
    static func decodePublishAcks(_ b: inout ByteBuffer) throws(FrameDecodingError) -> [PublishAck] {
        guard let count: UInt16 = b.readInteger(endianness: .little) else { throw FrameDecodingError(reason: "binary ack is truncated") }
        var acks: [PublishAck] = []
        acks.reserveCapacity(Int(count))
        for _ in 0..<count {
            guard let id: UInt64 = b.readInteger(endianness: .little), let seq: UInt64 = b.readInteger(endianness: .little) else {
                throw FrameDecodingError(reason: "binary ack is truncated")
            }
            acks.append(PublishAck(requestID: id, seq: seq, epoch: nil))
        }
        var covered = 0
        while b.readableBytes > 0 {
            guard let n: UInt16 = b.readInteger(endianness: .little), let epoch = readShortString(&b) else {
                throw FrameDecodingError(reason: "binary ack is truncated (epoch)")
            }
            guard n > 0, covered + Int(n) <= acks.count else { throw FrameDecodingError(reason: "binary ack epochs do not match its acks") }
            for index in covered..<(covered + Int(n)) { acks[index].epoch = epoch }
            covered += Int(n)
        }
        guard covered == 0 || covered == acks.count else { throw FrameDecodingError(reason: "binary ack epochs do not match its acks") }
        return acks
    }
}
