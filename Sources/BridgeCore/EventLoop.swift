import CUV

/// The one libuv loop that runs transport, timers and the engine. Everything
/// that touches it runs on the thread that calls `run()`; no locks needed.
public final class EventLoop {
    package let uv: UnsafeMutablePointer<uv_loop_t>

    public init() {
        uv = .allocate(capacity: 1)
        let rc = uv_loop_init(uv)
        precondition(rc == 0, "uv_loop_init: \(String(cString: uv_strerror(rc)))")
    }

    deinit {
        // Close any handles still open (timers, pipes) so uv_loop_close succeeds;
        // a child process's handle is ours to free (ChildProcess.swift).
        uv_walk(uv, { h, _ in
            guard let h, uv_is_closing(h) == 0 else { return }
            if h.pointee.type == UV_PROCESS { closeChildHandle(h) } else { uv_close(h, nil) }
        }, nil)
        // After a stop() (the server's exit) uv_run returns at once, clearing
        // the flag as it does: run until the closes above have finished, or
        // uv_loop_close fails and the loop's memory leaks.
        while uv_run(uv, UV_RUN_DEFAULT) != 0 {}
        uv_loop_close(uv)
        uv.deallocate()
    }

    /// Runs until `stop()` or until nothing is left to do.
    public func run() { uv_run(uv, UV_RUN_DEFAULT) }

    /// Runs one iteration without blocking (tests drive the loop with this).
    @discardableResult
    public func runOnce() -> Bool { uv_run(uv, UV_RUN_NOWAIT) != 0 }

    public func stop() { uv_stop(uv) }

    /// The loop's cached monotonic time in milliseconds.
    public var nowMs: UInt64 { uv_now(uv) }

    /// Monotonic nanoseconds now (not the loop's cached time): latencies.
    public static var hrtimeNs: UInt64 { uv_hrtime() }
}
