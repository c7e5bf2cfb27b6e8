import Foundation
import NIOConcurrencyHelpers

/// A throwaway PostgreSQL server for tests and benchmarks (`rtm bench cluster`): `initdb` into
/// a temporary directory, `pg_ctl start`
/// on a free loopback port with trust authentication, and `stop()` (or `kill()`, as a crash)
/// that can be followed by `start()` again on the same data and port (a database that goes away
/// under load and comes back).
///
/// PostgreSQL refuses to run as root, so under root (CI) the data directory is handed to the
/// `postgres` user and every command runs through `runuser`. The binaries are looked up in
/// `RTM_PG_BINDIR`, then the highest `/usr/lib/postgresql/*/bin`, then `PATH`.
public final class LocalPostgres: @unchecked Sendable {
    /// The loopback port it listens on.
    public let port: Int
    /// The superuser name (trust authentication: no password).
    public let user = "postgres"
    /// The database to connect to.
    public let database = "postgres"
    private let directory: URL
    private let binDirectory: String
    private let runAsUser: String?
    /// Settings added to the command line at each `start()` (`name=value`).
    private let settings: NIOLockedValueBox<[String]> = NIOLockedValueBox([])

    /// A URL for `rtm serve --postgres`.
    public var url: String { "postgres://\(user)@127.0.0.1:\(port)/\(database)" }

    /// Whether it runs with PostgreSQL's default durability (fsync, synchronous commit): for
    /// benchmarks. Tests run without (faster, and a test's data need not survive a crash of
    /// the machine).
    private let durable: Bool

    private init(port: Int, directory: URL, binDirectory: String, runAsUser: String?, durable: Bool) {
        self.durable = durable
        self.port = port
        self.directory = directory
        self.binDirectory = binDirectory
        self.runAsUser = runAsUser
    }

    /// Whether PostgreSQL's server binaries can be found on this machine.
    public static var isAvailable: Bool { findBinDirectory() != nil }

    /// Whether tests that need PostgreSQL run: when it is installed, or always when
    /// `RTM_REQUIRE_POSTGRES` is set (CI: a missing server then fails the tests instead of
    /// skipping them).
    public static var isRequiredOrAvailable: Bool {
        ProcessInfo.processInfo.environment["RTM_REQUIRE_POSTGRES"] != nil || isAvailable
    }

    /// Creates a cluster in a new temporary directory and starts it; `durable`: with fsync and
    /// synchronous commit (PostgreSQL's defaults) instead of without.
    ///
    /// Every command of this type waits for `initdb`, `pg_ctl` or `psql` on a thread of its own
    /// (`onOwnThread`), never on one of the Swift concurrency pool's.
    public static func start(durable: Bool = false) async throws -> LocalPostgres {
        try await onOwnThread { try startNow(durable: durable) }
    }

    private static func startNow(durable: Bool) throws -> LocalPostgres {
        guard let bin = findBinDirectory() else {
            throw LocalPostgresError("PostgreSQL server binaries (initdb, pg_ctl) not found; set RTM_PG_BINDIR")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-pg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let runAs: String? = geteuid() == 0 ? "postgres" : nil
        if let runAs {
            try run("/bin/chown", ["-R", runAs, directory.path])
        }
        var server = LocalPostgres(port: try LoopbackPort.free(), directory: directory, binDirectory: bin, runAsUser: runAs, durable: durable)
        try server.command("initdb", ["-D", server.dataPath, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
        try startOnFreePort(&server)
        return server
    }

    /// Starts `server` for the first time; when its port was taken between the check and the
    /// bind (a process of another test chose the same one), again on another port, a few times.
    private static func startOnFreePort(_ server: inout LocalPostgres) throws {
        for attempt in 1... {
            do {
                return try server.startNow()
            } catch is LocalPostgresError where attempt < 5 && server.log.contains("could not bind") {
                try? FileManager.default.removeItem(at: server.directory.appendingPathComponent("server.log"))
                server = LocalPostgres(port: try LoopbackPort.free(), directory: server.directory, binDirectory: server.binDirectory,
                                       runAsUser: server.runAsUser, durable: server.durable)
            }
        }
        fatalError("unreachable: the last attempt returns or throws")
    }

    private var dataPath: String { directory.appendingPathComponent("data").path }

    /// Starts (or restarts) the server on its port and waits until it accepts connections.
    public func start() async throws {
        try await onOwnThread { try self.startNow() }
    }

    private func startNow() throws {
        let options = "-p \(port) -k \(directory.path) -c listen_addresses=127.0.0.1 -c max_connections=200"
            + (durable ? "" : " -c fsync=off -c synchronous_commit=off -c full_page_writes=off")
            + settings.withLockedValue { $0.map { " -c \($0)" }.joined() }
        do {
            try command("pg_ctl", ["-D", dataPath, "-o", options, "-l", directory.appendingPathComponent("server.log").path, "-w", "-t", "30", "start"])
        } catch let error as LocalPostgresError {
            // pg_ctl says only "Examine the log output": the log's last lines say why.
            let tail = log.split(separator: "\n").suffix(5).joined(separator: "\n")
            throw LocalPostgresError("\(error.description)\nserver log (last lines):\n\(tail)")
        }
    }

    /// Settings for the next `start()` (`name=value`, e.g. `synchronous_commit=on`); they
    /// come after the defaults, so they win.
    public func set(_ settings: [String]) {
        self.settings.withLockedValue { $0 = settings }
    }

    /// Restarts this primary so that every commit waits for one synchronous standby
    /// (`synchronous_commit = on`, `synchronous_standby_names = 'ANY 1 (*)'`): with a replica
    /// (`startReplica`) a promotion loses nothing acknowledged. Without one, commits wait for ever.
    public func requireSynchronousStandby() async throws {
        set(["synchronous_commit=on", "synchronous_standby_names='ANY 1 (*)'"])
        try await stop()
        try await start()
    }

    /// A streaming replica of this server (`pg_basebackup -R -X stream`), started on its own
    /// port, named `name` to the primary (`application_name`, for
    /// `synchronous_standby_names`). Replication is asynchronous unless the primary is
    /// configured otherwise. `through`: the port the replica reaches this server on (a proxy
    /// that delays or cuts the replication link); nil: this server's own.
    public func startReplica(name: String = "replica", through linkPort: Int? = nil) async throws -> LocalPostgres {
        try await onOwnThread { try self.startReplicaNow(name: name, through: linkPort) }
    }

    private func startReplicaNow(name: String, through linkPort: Int?) throws -> LocalPostgres {
        let replicaDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-pg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: replicaDirectory, withIntermediateDirectories: true)
        if let runAsUser { try Self.run("/bin/chown", ["-R", runAsUser, replicaDirectory.path]) }
        var replica = LocalPostgres(port: try LoopbackPort.free(), directory: replicaDirectory, binDirectory: binDirectory,
                                         runAsUser: runAsUser, durable: durable)
        try command("pg_basebackup", ["-h", "127.0.0.1", "-p", "\(linkPort ?? port)", "-U", user, "-D", replica.dataPath, "-R", "-X", "stream",
                                      "-d", "application_name=\(name)", "--no-sync"])
        try Self.startOnFreePort(&replica)
        return replica
    }

    /// Promotes a replica to primary (`pg_ctl promote`), waiting until it accepts writes: a
    /// new timeline begins.
    public func promote() async throws {
        try await wait("pg_ctl", ["-D", dataPath, "-w", "-t", "30", "promote"])
    }

    /// Kills the postmaster and every backend with `SIGKILL` (`kill -9`): a crash of the
    /// machine as far as the clients can tell; nothing is flushed or shut down.
    public func crash() throws {
        try signalAll(SIGKILL)
    }

    /// Runs one statement with `psql` and returns its rows, unaligned (`|` between columns,
    /// one row per line).
    public func sql(_ statement: String) async throws -> String {
        try await wait("psql", ["-h", "127.0.0.1", "-p", "\(port)", "-U", user, "-d", database, "-X", "-A", "-t", "-c", statement])
    }

    /// Stops the server cleanly (connections are closed).
    public func stop() async throws {
        try await wait("pg_ctl", ["-D", dataPath, "-m", "fast", "-w", "stop"])
    }

    /// Stops the server the hard way (`immediate`: no shutdown checkpoint, as after a crash).
    public func kill() async throws {
        try await wait("pg_ctl", ["-D", dataPath, "-m", "immediate", "-w", "stop"])
    }

    /// Freezes the server and every backend (`SIGSTOP`): connections stay open and queries are
    /// taken by the kernel but never answered, a database that black-holes its clients.
    /// `thaw()` lets it go on.
    public func freeze() throws {
        try signalAll(SIGSTOP)
    }

    /// Resumes a frozen server (`SIGCONT`): the queries it took are answered.
    public func thaw() throws {
        try signalAll(SIGCONT)
    }

    /// The postmaster's pid, from `postmaster.pid`.
    private func postmasterPID() throws -> pid_t {
        let pidFile = try String(contentsOfFile: dataPath + "/postmaster.pid", encoding: .utf8)
        guard let postmaster = pid_t(pidFile.split(separator: "\n").first ?? "") else {
            throw LocalPostgresError("no pid in \(dataPath)/postmaster.pid")
        }
        return postmaster
    }

    /// The postmaster (from `postmaster.pid`) and its children, by `/proc`.
    private func signalAll(_ signal: Int32) throws {
        let postmaster = try postmasterPID()
        var pids = [postmaster]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            // Fields after the command name: state, then the parent's pid.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, pid_t(fields[1]) == postmaster { pids.append(pid) }
        }
        for pid in pids where Glibc.kill(pid, signal) != 0 && errno != ESRCH {
            throw LocalPostgresError("kill(\(pid), \(signal)) failed: errno \(errno)")
        }
    }

    /// Stops the server if it runs and deletes its directory, without holding the caller: the
    /// postmaster and its backends get `SIGQUIT`, PostgreSQL's immediate shutdown (what
    /// `pg_ctl -m immediate` sends), and a thread of its own removes the directory once the
    /// postmaster has exited (bounded: 30 s), as removing it earlier leaves it half deleted. A
    /// wait here would hold a Swift concurrency pool thread (it runs in `defer`s of async tests).
    /// A process that exits at once may leave its last directories behind.
    public func destroy() {
        try? thaw()   // a frozen server would not hear the signal
        let postmaster = try? postmasterPID()
        try? signalAll(SIGQUIT)
        let directory = directory
        Thread {
            if let postmaster {
                let end = ContinuousClock.now + .seconds(30)
                // Polling the process table: the postmaster is not this process's child, so its
                // exit has no event here.
                while Glibc.kill(postmaster, 0) == 0 && ContinuousClock.now < end { usleep(5_000) }
            }
            try? FileManager.default.removeItem(at: directory)
        }.start()
    }

    /// The server's log so far (for a failing test's message).
    public var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("server.log"), encoding: .utf8)) ?? ""
    }

    /// `command` on a thread of its own (`onOwnThread`).
    @discardableResult
    private func wait(_ name: String, _ arguments: [String]) async throws -> String {
        try await onOwnThread { try self.command(name, arguments) }
    }

    @discardableResult
    private func command(_ name: String, _ arguments: [String]) throws -> String {
        let path = binDirectory + "/" + name
        if let runAsUser {
            return try Self.run("/usr/sbin/runuser", ["-u", runAsUser, "--", path] + arguments)
        } else {
            return try Self.run(path, arguments)
        }
    }

    /// Runs a command to its end. Not through Foundation's `Process`: it learns that a child
    /// exited from a socket the child inherits, and `pg_ctl start` leaves a server running
    /// that inherits it too, so `waitUntilExit()` would wait for the server to stop. Output
    /// goes to a file (a pipe would stay open for the same reason); it is returned.
    @discardableResult
    private static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-pg-cmd-\(UUID().uuidString.prefix(8)).log").path
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of this process is inherited: a server started by `pg_ctl` outlives the
        // command, and with copies of the test's sockets (proxies, clients, nodes) it would keep
        // every one of them open after the test closes it, so no peer would ever see it close.
        // (glibc ignores a close of a descriptor closed meanwhile.)
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
            if let fd = Int32(entry), fd > 2 { posix_spawn_file_actions_addclose(&actions, fd) }
        }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else { throw LocalPostgresError("cannot run \(executable): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let exited = status & 0x7f == 0
        let code = (status >> 8) & 0xff
        guard exited && code == 0 else {
            let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            throw LocalPostgresError("\(executable) \(arguments.joined(separator: " ")) failed (status \(status)): \(text)")
        }
        return (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    }

    private static func findBinDirectory() -> String? {
        let fileManager = FileManager.default
        if let configured = ProcessInfo.processInfo.environment["RTM_PG_BINDIR"] {
            return fileManager.isExecutableFile(atPath: configured + "/pg_ctl") ? configured : nil
        }
        let versions = ((try? fileManager.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .compactMap(Int.init).sorted(by: >)
        for version in versions where fileManager.isExecutableFile(atPath: "/usr/lib/postgresql/\(version)/bin/pg_ctl") {
            return "/usr/lib/postgresql/\(version)/bin"
        }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":")
        where fileManager.isExecutableFile(atPath: "\(directory)/pg_ctl") && fileManager.isExecutableFile(atPath: "\(directory)/initdb") {
            return String(directory)
        }
        return nil
    }
}

/// Why the test PostgreSQL could not be set up.
public struct LocalPostgresError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
