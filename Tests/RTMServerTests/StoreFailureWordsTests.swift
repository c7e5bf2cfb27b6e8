import Testing
@testable import RTMServer

/// The reasons of store failures sent to clients (never a library's text).
struct StoreFailureWordsTests {
    struct Timeout: DatabaseTimeout {
        var description: String { "the database did not answer a metadata write within 5 s" }
    }

    struct DriverError: Error, CustomStringConvertible {
        var description: String { "PSQLError – Generic description to prevent accidental leakage of sensitive data" }
    }

    @Test("A write that timed out or lost its link: its outcome is unknown; a read's failure, or a refusal before anything was sent, says only why; a driver's text never shows")
    func reasons() {
        #expect(StoreFailureWords.reason("the store could not be written", Timeout(), write: true)
                == "the store could not be written: the database did not answer a metadata write within 5 s; the outcome is unknown: read it again before retrying")
        #expect(StoreFailureWords.reason("the store could not be written", CancellationError(), write: true)
                == "the store could not be written: the database link was lost; the outcome is unknown: read it again before retrying")
        #expect(StoreFailureWords.reason("the store could not be read", Timeout(), write: false)
                == "the store could not be read: the database did not answer a metadata write within 5 s")
        #expect(StoreFailureWords.reason("the history could not be written", DatabaseLinkDown(), write: true)
                == "the history could not be written: the cluster's database is unreachable from this node")
        #expect(StoreFailureWords.reason("the history could not be read", DriverError(), write: false)
                == "the history could not be read: the database failed (the server's log has the details)")
    }
}
