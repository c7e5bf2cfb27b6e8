import NIOCore

/// Peers whose rhythm is the behaviour under test: a client that keeps its link alive by
/// pinging, a slow writer (slowloris). The one place these paced writes wait.
extension RawPeer {
    /// Writes `frames` every `interval` until the server closes the connection or the returned
    /// task is cancelled.
    public func keepWriting(_ frames: [ByteBuffer], every interval: Duration) -> Task<Void, Never> {
        Task {
            while !isClosed, !Task.isCancelled {
                for frame in frames { try? await write(frame) }
                try? await Task.sleep(for: interval)   // pacing: the rhythm is what the server sees
            }
        }
    }

    /// Writes `bytes` one byte every `interval` until all are written, the server closes the
    /// connection or the returned task is cancelled.
    public func trickle(_ bytes: ByteBuffer, every interval: Duration) -> Task<Void, Never> {
        Task {
            for byte in bytes.readableBytesView where !isClosed && !Task.isCancelled {
                try? await write(ByteBuffer(bytes: [byte]))
                try? await Task.sleep(for: interval)   // pacing: the slowness is the attack
            }
        }
    }
}
