import CUV

/// Holds a queued job's closures across the C callbacks.
private final class LoopWorkBox {
    let run: () -> Void
    let finish: () -> Void
    init(run: @escaping () -> Void, finish: @escaping () -> Void) {
        self.run = run
        self.finish = finish
    }
}

extension EventLoop {
    /// Runs `work` on libuv's thread pool and then `done` with its result on
    /// the loop thread. For CPU-bound work that would stall the loop if run on
    /// it (a redaction of megabytes of text): the loop keeps serving other
    /// requests meanwhile. `work` must not touch loop-owned state.
    public func runOffLoop<T>(_ work: @escaping () -> T, done: @escaping (T) -> Void) {
        var result: T?
        // libuv orders the two callbacks (work, then after-work on the loop),
        // so `result` is written once before it is read.
        let box = LoopWorkBox(run: { result = work() }, finish: { done(result!) })
        let req = UnsafeMutablePointer<uv_work_t>.allocate(capacity: 1)
        req.initialize(to: uv_work_t())
        req.pointee.data = Unmanaged.passRetained(box).toOpaque()
        let rc = uv_queue_work(uv, req, { r in
            Unmanaged<LoopWorkBox>.fromOpaque(r!.pointee.data).takeUnretainedValue().run()
        }, { r, _ in
            let b = Unmanaged<LoopWorkBox>.fromOpaque(r!.pointee.data).takeRetainedValue()
            r!.deallocate()
            b.finish()
        })
        if rc != 0 {
            // Could not queue (loop closing): do it here rather than drop it.
            Unmanaged<LoopWorkBox>.fromOpaque(req.pointee.data).release()
            req.deallocate()
            done(work())
        }
    }
}
