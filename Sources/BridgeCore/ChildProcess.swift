import CUV
#if canImport(Glibc)
import Glibc
#endif

/// Why a child could not be started (libuv's error text: "no such file or directory").
public struct SpawnError: Error, CustomStringConvertible {
    public let description: String
}

/// Holds the exit callback until libuv reports the exit, then frees the handle.
private final class ChildBox {
    let exited: (Int64, Int32) -> Void
    init(_ exited: @escaping (Int64, Int32) -> Void) { self.exited = exited }
}

extension EventLoop {
    /// Starts `argv` in `cwd` on this loop, stdin from /dev/null and output
    /// discarded (the child reports through its own channels: Claude Code
    /// through its hooks). `exited(status, signal)` runs on the loop thread;
    /// the loop does not wait for the child to exit before it stops.
    public func spawn(_ argv: [String], cwd: String?, exited: @escaping (_ status: Int64, _ signal: Int32) -> Void) throws {
        precondition(!argv.isEmpty)
        let proc = UnsafeMutablePointer<uv_process_t>.allocate(capacity: 1)
        proc.initialize(to: uv_process_t())
        var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        let cCwd = cwd.map { strdup($0) } ?? nil
        defer {
            for a in cArgs { free(a) }
            free(cCwd)
        }
        var stdio = [uv_stdio_container_t](repeating: uv_stdio_container_t(), count: 3)
        for i in stdio.indices { stdio[i].flags = UV_IGNORE }
        let rc: Int32 = cArgs.withUnsafeMutableBufferPointer { args in
            stdio.withUnsafeMutableBufferPointer { io in
                var opts = uv_process_options_t()
                opts.file = UnsafePointer(args[0])
                opts.args = args.baseAddress
                opts.cwd = UnsafePointer(cCwd)
                opts.stdio_count = 3
                opts.stdio = io.baseAddress
                opts.exit_cb = { p, status, signal in
                    let box = Unmanaged<ChildBox>.fromOpaque(p!.pointee.data).takeRetainedValue()
                    p!.pointee.data = nil
                    uv_close(UnsafeMutableRawPointer(p!).assumingMemoryBound(to: uv_handle_t.self)) { h in h?.deallocate() }
                    box.exited(status, signal)
                }
                return uv_spawn(uv, proc, &opts)
            }
        }
        guard rc == 0 else {
            // libuv wants the handle closed even when the spawn failed.
            uv_close(UnsafeMutableRawPointer(proc).assumingMemoryBound(to: uv_handle_t.self)) { h in h?.deallocate() }
            throw SpawnError(description: String(cString: uv_strerror(rc)))
        }
        proc.pointee.data = Unmanaged.passRetained(ChildBox(exited)).toOpaque()
        // A pending child must not keep a stopping daemon's loop alive.
        uv_unref(UnsafeMutableRawPointer(proc).assumingMemoryBound(to: uv_handle_t.self))
    }
}

/// Closes a child's handle still open when the loop ends (the child outlived
/// the daemon's loop): its exit callback and memory go with it.
func closeChildHandle(_ h: UnsafeMutablePointer<uv_handle_t>) {
    uv_close(h) { h in
        if let d = h?.pointee.data { Unmanaged<ChildBox>.fromOpaque(d).release() }
        h?.deallocate()
    }
}
