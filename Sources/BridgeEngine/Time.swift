/// Engine time: milliseconds on the host's clock (monotonic or manual). The
/// engine never reads a clock itself; every entry point takes `now`, which is
/// what lets tests drive a 60 s approval timeout or a 1 h reminder instantly.
public typealias Millis = Int64

extension Millis {
    static func seconds(_ s: Double) -> Millis { Millis((s * 1000).rounded()) }
}
