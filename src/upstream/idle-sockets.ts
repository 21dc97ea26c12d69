/**
 * Closes pooled upstream connections that stay idle for `idleMs`, before the upstream closes them
 * itself (a Node server does after 5 s): a request sent on a connection the upstream is closing
 * fails. `http.Agent`'s own `timeout` option would do it, but it also arms a timer on every
 * request's socket and adds a listener to every request; this sweep costs the requests nothing.
 */
import type { Agent } from "node:http";
import type { Socket } from "node:net";

/** Starts the sweep over `agent`'s idle sockets; the function returned stops it. */
export function closeIdleSockets(agent: Agent, idleMs: number): () => void {
  // Bytes written by each idle socket at the last sweep: a socket that wrote nothing between two
  // sweeps half the idle time apart has been idle for at least half of it and at most all of it.
  const written = new WeakMap<Socket, number>();
  const sweep = (): void => {
    for (const sockets of Object.values(agent.freeSockets) as Array<Socket[] | undefined>) {
      for (const socket of sockets ?? []) {
        if (written.get(socket) === socket.bytesWritten) socket.destroy();
        else written.set(socket, socket.bytesWritten);
      }
    }
  };
  const timer = setInterval(sweep, Math.max(1, Math.floor(idleMs / 2)));
  // The sweep never holds the process open.
  timer.unref();
  return () => clearInterval(timer);
}
