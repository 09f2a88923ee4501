import Testing
@testable import BridgeRPC
import BridgeCore

@Suite struct RPCTransportTests {
    @Test func placeholderPing() {
        let env = ServerEnvironment(loop: EventLoop(), options: ServerOptions())
        let server = try! RPCServer(env: env, methods: MethodTable())
        let c = server.makeInProcessClient()
        #expect(c.send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n") == "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n")
    }
}
