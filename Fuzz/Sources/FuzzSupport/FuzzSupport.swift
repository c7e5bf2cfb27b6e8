#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// libFuzzer's driver, linked by `-sanitize=fuzzer`. The executable keeps its own `main` (SwiftPM
// links executables with `--defsym main=<Module>_main`, which fails for a `-parse-as-library`
// entry point; see Fuzz/run.sh) and hands control to libFuzzer from there.
@_silgen_name("LLVMFuzzerRunDriver")
private func llvmFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// The input handler of this process, set once by `fuzzMain` before libFuzzer starts.
nonisolated(unsafe) private var handler: ((UnsafeRawBufferPointer) -> Void)?

/// libFuzzer's `main` (whole-archive linked) refers to this symbol; it is never called, since our
/// own `main` runs the driver with the handler.
@_cdecl("LLVMFuzzerTestOneInput")
public func llvmFuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    handler?(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

/// Runs libFuzzer with `test` as the input handler (libFuzzer's command-line options apply:
/// `-max_total_time=N`, a corpus directory, a crash file to replay) and exits with its status.
/// `test` must not throw or trap on any input: a trap, an address-sanitizer report or a leak is
/// a finding.
public func fuzzMain(_ test: @escaping (UnsafeRawBufferPointer) -> Void) -> Never {
    handler = test
    var argc = CommandLine.argc
    var argv = CommandLine.unsafeArgv
    exit(llvmFuzzerRunDriver(&argc, &argv, llvmFuzzerTestOneInput))
}
