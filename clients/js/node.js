// Node 18+ transports (no packages): a server of our own on stdio, or a
// daemon's unix socket, both newline-delimited JSON. Re-exports the core.
import { spawn } from "node:child_process";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { Client, start } from "./codingbridge.js";

export * from "./codingbridge.js";

/** The socket `serve --listen unix` and `codingbridge hook` agree on. */
export function defaultSocket(stateDir) {
  const dir = stateDir ?? path.join(process.env.XDG_STATE_HOME || path.join(os.homedir(), ".local", "state"),
    "codingbridge");
  return path.join(dir, "codingbridge.sock");
}

// NDJSON over a readable/writable pair.
function lines(readable, writable, close) {
  return {
    start(onMessage, onClose) {
      let buf = "";
      readable.setEncoding("utf8");
      readable.on("data", (chunk) => {
        buf += chunk;
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line) onMessage(line);
        }
      });
      readable.on("close", () => onClose("the server closed the connection"));
      readable.on("error", (e) => onClose(e.message));
    },
    send: (text) => writable.write(text + "\n"),
    close,
  };
}

/**
 * Starts `command serve ...args` and talks to it on its stdin/stdout; the
 * server ends when the client closes (EOF on its stdin).
 * Options: {command = "codingbridge", args = ["--ephemeral"], stderr = "inherit", initialize = true, timeout, ...initialize params}
 */
export function connectStdio({ command = "codingbridge", args = ["--ephemeral"], stderr = "inherit",
  initialize = true, timeout, ...init } = {}) {
  const child = spawn(command, ["serve", ...args], { stdio: ["pipe", "pipe", stderr] });
  const failed = new Promise((_, reject) => child.on("error", reject));
  const client = new Client(lines(child.stdout, child.stdin, () => child.stdin.end()), { timeout });
  client.process = child;
  return Promise.race([start(client, initialize, init), failed]);
}

/**
 * Connects to a daemon's socket: {path}, else <stateDir>/codingbridge.sock,
 * else the default one. Options: {path, stateDir, initialize = true, timeout, ...initialize params}
 */
export function connectUnix({ path: socketPath, stateDir, initialize = true, timeout, ...init } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.createConnection(socketPath ?? defaultSocket(stateDir));
    sock.once("error", reject);
    sock.once("connect", () => {
      sock.off("error", reject);
      const client = new Client(lines(sock, sock, () => sock.end()), { timeout });
      start(client, initialize, init).then(resolve, reject);
    });
  });
}
