#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// The data directory (`ServerConfiguration.dataDirectory`, `rtm serve --data-dir`) cannot be
/// used: which directory, and why, in our words (never the file system layer's error text).
public struct DataDirectoryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The data directory as configured.
    public let path: String
    /// What failed, naming the path it failed on: "permission denied creating /srv/rtm-data",
    /// "/tmp/x is a file, not a directory".
    public let problem: String

    /// Creates the error.
    public init(path: String, problem: String) {
        self.path = path
        self.problem = problem
    }

    /// `cannot use the data directory 'rtm-data': permission denied creating /root/rtm-data`.
    public var description: String { "cannot use the data directory '\(path)': \(problem)" }
}

/// Makes sure the data directory exists and takes new files, before any store opens in it.
public enum DataDirectory {
    /// Creates `path` and its missing parents, then checks that a file can be created in it.
    /// Throws a `DataDirectoryError` naming the part of the path that failed and why.
    public static func prepare(_ path: String) throws(DataDirectoryError) {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        func fail(_ problem: String) -> DataDirectoryError { DataDirectoryError(path: path, problem: problem) }
        // One component at a time (mkdir -p), so that the error names the one that failed.
        var current = ""
        for component in absolute.split(separator: "/") where component != "." {
            current += "/" + component
            var info = stat()
            if stat(current, &info) == 0 {
                guard info.st_mode & S_IFMT == S_IFDIR else { throw fail("\(current) is a file, not a directory") }
                continue
            }
            let statError = errno
            guard statError == ENOENT else { throw fail("\(words(statError)) reaching \(current)") }
            if mkdir(current, 0o755) != 0, errno != EEXIST { throw fail("\(words(errno)) creating \(current)") }
        }
        // The stores create their files (and SQLite its journal) in it: try one.
        let probe = absolute + "/.rtm-write-check-\(getpid())"
        let descriptor = open(probe, O_CREAT | O_WRONLY | O_TRUNC, 0o600)
        guard descriptor >= 0 else { throw fail("\(words(errno)) creating files in \(absolute)") }
        close(descriptor)
        unlink(probe)
    }

    /// An `errno` in words.
    static func words(_ code: Int32) -> String {
        switch code {
        case EACCES, EPERM: "permission denied"
        case EROFS: "read-only file system"
        case ENOENT: "no such directory (and it cannot be created there)"
        case ENOTDIR: "a part of the path is a file, not a directory"
        case ENOSPC: "no space left on the device"
        case EDQUOT: "disk quota exceeded"
        case ENAMETOOLONG: "the path is too long"
        case ELOOP: "too many symbolic links"
        default: "system error \(code)"
        }
    }
}
