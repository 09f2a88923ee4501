import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Spawns a child with its stdin and stdout on pipes and stderr on /dev/null:
/// the benchmarks drive the real `codingbridge serve` (and the echo baseline)
/// this way. posix_spawn, not Foundation.Process, so nothing else sits
/// between the benchmark and the pipe.
struct ChildPipes {
    let pid: pid_t
    let toChild: Int32
    let fromChild: Int32

    init(_ path: String, _ args: [String]) throws {
        var inPipe: [Int32] = [0, 0], outPipe: [Int32] = [0, 0]
        guard pipe(&inPipe) == 0, pipe(&outPipe) == 0 else { throw ValidationError("pipe failed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        for fd in [inPipe[0], inPipe[1], outPipe[0], outPipe[1]] { posix_spawn_file_actions_addclose(&actions, fd) }
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + args).map { strdup($0) } + [nil]
        var p: pid_t = 0
        let rc = posix_spawn(&p, path, &actions, nil, argv, environ)
        posix_spawn_file_actions_destroy(&actions)
        for a in argv { free(a) }
        guard rc == 0 else { throw ValidationError("cannot start \(path): \(String(cString: strerror(rc)))") }
        close(inPipe[0]); close(outPipe[1])
        pid = p
        toChild = inPipe[1]
        fromChild = outPipe[0]
    }

    /// Closes the child's stdin (EOF ends the server), reaps it, closes its stdout.
    static func finish(pid: pid_t, toChild: Int32, fromChild: Int32) {
        close(toChild)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        close(fromChild)
    }
}

/// The binaries the benchmarks run: built next to cb-bench (or in --bin-dir).
enum BenchBinary {
    /// The directory cb-bench itself was started from.
    static func ownDirectory() -> String {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return (exe as NSString).deletingLastPathComponent
    }

    /// `name` in `binDir`, else next to cb-bench; nil when it is not there.
    static func find(_ name: String, binDir: String?) -> String? {
        let p = (binDir ?? ownDirectory()) + "/" + name
        return access(p, X_OK) == 0 ? p : nil
    }

    /// Like `find`, for a benchmark that cannot run without it.
    static func require(_ name: String, binDir: String?) throws -> String {
        guard let p = find(name, binDir: binDir) else {
            throw ValidationError("\((binDir ?? ownDirectory()) + "/" + name) not found: run `swift build -c release` first (or pass --bin-dir)")
        }
        return p
    }
}
