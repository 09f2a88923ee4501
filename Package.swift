// swift-tools-version:6.0
import PackageDescription

// C does mechanism and speed (CBridge), Swift does policy (BridgeEngine), the RPC
// layer only translates (BridgeRPC). System libraries come from Debian's -dev
// packages through pkg-config; `make deps` installs them.
func system(_ name: String, _ pkg: String, _ apt: String) -> Target {
    .systemLibrary(name: name, pkgConfig: pkg, providers: [.apt([apt])])
}

let package = Package(
    name: "CodingBridgeCore",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "codingbridge", targets: ["codingbridge"]),
        .executable(name: "cb-bench", targets: ["cb-bench"]),
        .executable(name: "cb-fuzz-dispatch", targets: ["cb-fuzz-dispatch"]),
        .library(name: "BridgeCore", targets: ["BridgeCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    ],
    targets: [
        system("CUV", "libuv", "libuv1-dev"),
        system("CJansson", "jansson", "libjansson-dev"),
        system("CPCRE2", "libpcre2-8", "libpcre2-dev"),
        system("CSQLite", "sqlite3", "libsqlite3-dev"),
        .target(
            name: "CBridge",
            dependencies: ["CUV", "CJansson", "CPCRE2", "CSQLite"],
            path: ".",
            sources: ["Sources/CBridge"],
            publicHeadersPath: "include",
            cSettings: [.unsafeFlags(["-O2", "-fno-strict-aliasing"])],
            // The network listener (H2O's libuv build, wslay for WebSocket
            // frames), TLS and hashing (OpenSSL), pairing QR codes
            // (libqrencode), the push client (libcurl with nghttp2): only
            // CBridge's C files include their headers.
            linkerSettings: ["h2o", "wslay", "ssl", "crypto", "qrencode", "curl"].map { .linkedLibrary($0) }
        ),
        .target(name: "BridgeCore", dependencies: ["CBridge", "CJansson"]),
        .target(name: "BridgeEngine", dependencies: ["BridgeCore"]),
        .target(name: "BridgeRPC", dependencies: ["BridgeCore", "BridgeEngine"]),
        .executableTarget(
            name: "codingbridge",
            dependencies: ["BridgeRPC", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            // main.swift holds @main beside other files: compile it as a library file.
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        ),
        .executableTarget(
            name: "cb-bench",
            dependencies: ["BridgeRPC", "BridgeCore", "BridgeEngine",
                           .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        ),
        // libFuzzer target over the whole method dispatch (Tests/fuzz/dispatch/run.sh).
        .executableTarget(name: "cb-fuzz-dispatch", dependencies: ["BridgeRPC", "BridgeCore"]),
        // A bare jansson newline-JSON echo: the baseline `cb-bench rpc` measures against.
        .executableTarget(name: "cb-echo-baseline", dependencies: ["CJansson"], path: "Sources/cb-echo-baseline"),
        // A bare WebSocket echo on H2O's own API, and the WebSocket / hook
        // load `cb-bench ws` drives both servers with.
        .executableTarget(name: "cb-ws-echo-baseline", dependencies: ["CUV"], path: "Sources/cb-ws-echo-baseline",
                          linkerSettings: ["h2o", "wslay", "ssl", "crypto"].map { .linkedLibrary($0) }),
        .executableTarget(name: "cb-ws-load", dependencies: ["CUV"], path: "Sources/cb-ws-load",
                          linkerSettings: ["h2o", "wslay"].map { .linkedLibrary($0) }),
        .testTarget(name: "BridgeCoreTests", dependencies: ["BridgeCore"]),
        .testTarget(name: "BridgeEngineTests", dependencies: ["BridgeEngine", "BridgeCore"]),
        .testTarget(name: "BridgeRPCTests", dependencies: ["BridgeRPC", "BridgeCore"]),
    ],
    swiftLanguageModes: [.v5]
)
