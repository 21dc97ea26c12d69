/** Binds a server to its address, failing with the bind's error (an address in use, say). */
import type { Server } from "node:http";

/** Resolves once `server` listens at `at`. */
export function listenOn(server: Server, at: { host: string; port: number }): Promise<void> {
  return new Promise((done, fail) => {
    server.once("error", fail);
    server.listen(at.port, at.host, () => {
      server.off("error", fail);
      done();
    });
  });
}
