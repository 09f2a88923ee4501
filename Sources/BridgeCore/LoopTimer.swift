import CUV

/// A repeating timer on the loop (housekeeping such as the slow-client
/// check). By default it does not keep the loop alive on its own. Stops
/// when the object goes away.
public final class LoopTimer {
    private let handle: UnsafeMutablePointer<uv_timer_t>
    private let body: () -> Void
    /// The loop outlives its timer, whatever order their owners go in.
    private let loop: EventLoop

    public init(loop: EventLoop, everyMs: UInt64, keepsLoopAlive: Bool = false, _ body: @escaping () -> Void) {
        self.body = body
        self.loop = loop
        handle = .allocate(capacity: 1)
        uv_timer_init(loop.uv, handle)
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        uv_timer_start(handle, { t in
            guard let d = t?.pointee.data else { return }
            Unmanaged<LoopTimer>.fromOpaque(d).takeUnretainedValue().body()
        }, max(1, everyMs), max(1, everyMs))
        if !keepsLoopAlive { uv_unref(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) }
    }

    deinit {
        handle.pointee.data = nil
        uv_timer_stop(handle)
        // libuv owns the memory until the close callback
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { h in
            if let h { UnsafeMutableRawPointer(h).deallocate() }
        }
    }
}
