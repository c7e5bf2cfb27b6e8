// swift-tools-version:6.2
import PackageDescription

let fuzzing = Context.environment["RTM_FUZZ"] != nil

// Swift 6 language mode everywhere; CI (RTM_WARNINGS_AS_ERRORS=1) also turns every warning in
// this package's own targets into an error (dependencies are not affected).
let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]
    + (Context.environment["RTM_WARNINGS_AS_ERRORS"] != nil ? [.treatAllWarnings(as: .error)] : [])
    // Server release builds for deployment and benchmarks (`Benchmarks/compare.sh`,
    // `RTM_FAST=1 swift build -c release`): no run-time exclusivity checks, which otherwise take
    // a sixth of the publish path (NIO's inlined ByteBuffer code runs them per field). Left out
    // of ordinary builds so the libraries stay usable as dependencies.
    + (Context.environment["RTM_FAST"] != nil ? [.unsafeFlags(["-enforce-exclusivity=unchecked"])] : [])
    // Fuzzing (`Fuzz/run.sh`, which sets RTM_FUZZ=1 and builds into .build-fuzz): this package's
    // modules get libFuzzer's coverage instrumentation and the address sanitizer, so the fuzzer
    // is guided by the code under test, not only by the harness.
    + (fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address"])] : [])

let package = Package(
    name: "swift-rtm",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .library(name: "RTMProtocol", targets: ["RTMProtocol"]),
        .library(name: "RTMClient", targets: ["RTMClient"]),
        .library(name: "RTMServer", targets: ["RTMServer"]),
        .library(name: "RTMAuth", targets: ["RTMAuth"]),
        .library(name: "RTMPostgres", targets: ["RTMPostgres"]),
        .executable(name: "rtm", targets: ["rtm"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-atomics.git", from: "1.3.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // `rtm serve`'s settings: command line, environment and JSON or YAML file, one declaration
        // per setting (`ServeSettingDeclarations`). YAML through Yams, which the trait brings in;
        // Yams is also named here because the settings reader lists a YAML file's keys itself.
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0", traits: [.defaults, "YAML"]),
        .package(url: "https://github.com/jpsim/Yams.git", "5.4.0"..<"7.0.0"),
        // `rtm admin`'s client, generated from openapi/admin.yaml by swift-openapi-generator
        // (committed: `RTMAdminAPI/README.md` says how to regenerate; CI checks it is current).
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        // `swift package generate-documentation --target RTMClient` (the DocC catalog; CI builds it).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
    ],
    targets: [
        // Wire protocol shared by server and SDK: frames, codec, error codes, limits. No I/O.
        .target(name: "RTMProtocol", dependencies: [
            .product(name: "NIOCore", package: "swift-nio"),
        ], swiftSettings: strict),
        // Token minting and verification (AccessToken "006" and AccessToken2 "007"). Server and CLI only.
        .target(name: "RTMAuth", dependencies: [
            "CRTMZlib",
            .product(name: "Crypto", package: "swift-crypto"),
        ], swiftSettings: strict),
        // The system zlib (AccessToken2 payloads are zlib-compressed). Part of the macOS SDK; on
        // Debian/Ubuntu it needs the `zlib1g-dev` package (installed by `.ci/run`).
        .systemLibrary(name: "CRTMZlib", path: "Sources/CRTMZlib", providers: [.apt(["zlib1g-dev"])]),
        // RFC 6455 rules both sides apply: frame headers, fragments, UTF-8, close frames, and
        // the handler that answers a violation with its close code. Server and SDK share it.
        .target(name: "RTMWebSocket", dependencies: [
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOWebSocket", package: "swift-nio"),
        ], swiftSettings: strict),
        .target(name: "RTMServer", dependencies: [
            // RTMAdminAPI: the admin API's types and routes, generated from openapi/admin.yaml.
            "RTMProtocol", "RTMAuth", "RTMWebSocket", "RTMAdminAPI",
            .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOWebSocket", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "DequeModule", package: "swift-collections"),
            .product(name: "GRDB", package: "GRDB.swift"),
            // The C API under GRDB, for the user-message store's per-message statements
            // (`SQLiteFastStatement`).
            .product(name: "GRDBSQLite", package: "GRDB.swift"),
            .product(name: "Metrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            // The admin API keeps revoked tokens as SHA-256 digests; webhooks are HMAC-signed.
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            .product(name: "Atomics", package: "swift-atomics"),
        ], swiftSettings: strict),
        // The cluster's shared state in PostgreSQL (`rtm serve --postgres URL`): schema
        // migrations, the channel message log and its follower. Apps never link it.
        // `PostgresChannelBackplane` plugs it into the server (RTMServer never depends on it).
        .target(name: "RTMPostgres", dependencies: [
            "RTMServer",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "PostgresNIO", package: "postgres-nio"),
        ], swiftSettings: strict),
        // The client SDK. Never depends on the server.
        .target(name: "RTMClient", dependencies: [
            "RTMProtocol", "RTMWebSocket",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOWebSocket", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            .product(name: "DequeModule", package: "swift-collections"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
        ], swiftSettings: strict),
        // A throwaway PostgreSQL server process (initdb + pg_ctl on a free loopback port): the
        // tests' database and `rtm bench cluster`'s.
        .target(name: "RTMLocalPostgres", dependencies: [
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
        ], swiftSettings: strict),
        // The fault-injecting TCP proxy (cut, black-hole, delay, retarget): the tests' and
        // `rtm bench cluster-outage`'s.
        .target(name: "RTMFaultProxy", dependencies: [
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
        ], swiftSettings: strict),
        // Test support: waiting helpers, raw peers, and the fault proxy re-exported.
        .target(name: "RTMTestSupport", dependencies: [
            "RTMLocalPostgres", "RTMFaultProxy",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
        ], swiftSettings: strict),
        // The contract suites of the shared-state seams (user messages, metadata and history,
        // locks, invitations): each rule once, run by RTMServerTests against the single node's
        // implementation and by RTMPostgresTests against the cluster's. Test code: nothing shipped
        // links it.
        .target(name: "RTMContracts", dependencies: [
            "RTMServer", "RTMProtocol",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
        ], swiftSettings: strict),
        // The load generator behind `rtm bench`: its own lean WebSocket client, HDR histograms.
        .target(name: "RTMBench", dependencies: [
            "RTMProtocol", "RTMAuth", "RTMClient",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            .product(name: "Histogram", package: "hdrhistogram-swift"),
            .product(name: "Atomics", package: "swift-atomics"),
        ], swiftSettings: strict + [
            // The load generator must cost less per message than the server it measures; its
            // per-loop state is confined to one event loop, so run-time exclusivity checks on it
            // (a large share of its profile) buy nothing. Not a product: nobody depends on it.
            .unsafeFlags(["-enforce-exclusivity=unchecked"]),
        ]),
        .executableTarget(name: "rtm", dependencies: [
            // RTMLocalPostgres: `rtm bench cluster` starts a throwaway PostgreSQL as the tests do.
            "RTMProtocol", "RTMAuth", "RTMServer", "RTMClient", "RTMBench", "RTMPostgres", "RTMLocalPostgres", "RTMFaultProxy", "RTMAdminAPI",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            // `rtm admin` over https with its own trust roots (`--ca-file`).
            .product(name: "NIOHTTP1", package: "swift-nio"),
            // `rtm bench idle-floor`: idle connections on NIO's own WebSocket server.
            .product(name: "NIOWebSocket", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "Configuration", package: "swift-configuration"),
            .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
            .product(name: "Yams", package: "Yams"),
        ], swiftSettings: strict),
        // The admin API's types, server routes and client, generated from openapi/admin.yaml
        // (package access): RTMServer implements the routes, `rtm admin` calls the client.
        // Swift 6 mode, its warnings silenced: the generator's output is not edited by hand, and
        // it imports modules some files do not use (`openapi/generate.sh --check` guards it).
        .target(name: "RTMAdminAPI", dependencies: [
            .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
        ], exclude: ["openapi-generator-config.yaml", "README.md"],
        swiftSettings: [.swiftLanguageMode(.v6), .unsafeFlags(["-suppress-warnings"])]),
        // A command-line chat with presence on the public SDK API only (`rtm-chat-example`).
        .executableTarget(name: "rtm-chat-example", dependencies: ["RTMClient"], path: "Examples/ChatExample",
                          swiftSettings: strict),
        .testTarget(name: "RTMProtocolTests", dependencies: ["RTMProtocol"], swiftSettings: strict),
        .testTarget(name: "RTMAuthTests", dependencies: ["RTMAuth"], swiftSettings: strict),
        .testTarget(name: "RTMPostgresTests", dependencies: [
            "RTMPostgres", "RTMTestSupport", "RTMContracts",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "PostgresNIO", package: "postgres-nio"),
        ], swiftSettings: strict),
        .testTarget(name: "RTMClientTests", dependencies: [
            "RTMClient", "RTMProtocol",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
        ], swiftSettings: strict),
        // The server's rules as values, time passed in: no sockets, no clock, milliseconds.
        .testTarget(name: "RTMServerTests", dependencies: [
            "RTMServer", "RTMProtocol", "RTMAuth", "RTMWebSocket", "RTMTestSupport", "RTMContracts",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOWebSocket", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "GRDB", package: "GRDB.swift"),
        ], swiftSettings: strict),
        .testTarget(name: "RTMIntegrationTests", dependencies: [
            "RTMClient", "RTMServer", "RTMProtocol", "RTMAuth", "RTMTestSupport", "RTMBench", "RTMWebSocket", "rtm", "RTMPostgres",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            .product(name: "NIOWebSocket", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: strict),
    ]
)

// libFuzzer targets, only with RTM_FUZZ=1 (they need a toolchain with libFuzzer, the swift.org
// one on Linux): `Fuzz/run.sh` builds and runs them. Each is an executable whose `main` hands
// control to libFuzzer (`FuzzSupport.fuzzMain`).
if fuzzing {
    let linkFuzzer: [LinkerSetting] = [.unsafeFlags(["-sanitize=fuzzer,address"])]
    package.targets.append(.target(name: "FuzzSupport", path: "Fuzz/Sources/FuzzSupport", swiftSettings: strict))
    let fuzzTargets: [(name: String, dependencies: [Target.Dependency])] = [
        ("FuzzFrameCodec", ["RTMProtocol", .product(name: "NIOCore", package: "swift-nio")]),
        ("FuzzBinaryFrame", ["RTMProtocol", .product(name: "NIOCore", package: "swift-nio")]),
        ("FuzzJSONPublish", ["RTMProtocol", .product(name: "NIOCore", package: "swift-nio")]),
        ("FuzzTokens", ["RTMAuth"]),
        ("FuzzServerFrameDecoder", ["RTMServer", .product(name: "NIOCore", package: "swift-nio"),
                                    .product(name: "NIOEmbedded", package: "swift-nio")]),
    ]
    for target in fuzzTargets {
        package.targets.append(.executableTarget(name: target.name, dependencies: ["FuzzSupport"] + target.dependencies,
                                                 path: "Fuzz/Sources/\(target.name)", swiftSettings: strict, linkerSettings: linkFuzzer))
        package.products.append(.executable(name: target.name, targets: [target.name]))
    }
}
