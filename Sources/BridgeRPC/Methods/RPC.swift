import BridgeCore

extension MethodTable {
    /// Diagnostics of the RPC layer itself.
    func registerRPC(_ env: ServerEnvironment) {
        // Echoes its params: a method that goes through the whole Swift path
        // (lookup, Params, handler, result encoding), so the benchmark can put
        // it next to the C-answered `ping`.
        on("debug.echo") { p, _ in
            if case .object(let o)? = p.raw { return .object(o) }
            return .object([:])
        }
    }
}
