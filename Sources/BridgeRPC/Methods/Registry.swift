/// Every method group, registered once per server. Each area keeps its
/// methods in a file of its own beside this one.
extension MethodTable {
    public func registerAll(_ env: ServerEnvironment) throws {
        try prepareContinuity(env)
        try registerRPC(env)
        try registerTime(env)
        try registerEngine(env)
        try registerOutbox(env)
        try registerRedaction(env)
        try registerAgents(env)
        try registerContinuity(env)
    }
}
