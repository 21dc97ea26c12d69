/**
 * Ports for servers that a test starts and stops itself. They are taken below the kernel's
 * ephemeral range (32768-60999 on Linux), which is where every listener on port 0 gets its port:
 * a port released by one test is never handed to a server of another test running at the
 * same time.
 */
import { createConnection } from "node:net";

const LOWEST = 20_000;
const COUNT = 12_000;

/** Whether a connection to 127.0.0.1:`port` is refused, i.e. nothing listens there. */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: "127.0.0.1" });
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", () => resolve(true));
  });
}

/** A port nothing listens on now, and that no port-0 listener will be given. */
export async function refusingPort(): Promise<number> {
  for (;;) {
    const port = LOWEST + Math.floor(Math.random() * COUNT);
    if (await refused(port)) return port;
  }
}
