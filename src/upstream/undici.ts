/**
 * The parts of undici gatehouse forwards with, loaded from their own modules. undici's entry
 * point loads everything it has (fetch, WebSocket, caches, cookies) and, through them, Node's
 * bundled copy of undici besides: measured on Node 24, 70 ms and 15 MB of RSS at every start,
 * against 22 ms for these three. They are the very classes the entry point exports, as a test
 * checks (upstream-undici.test.ts), and undici is pinned to a minor version.
 */
import { createRequire } from "node:module";
import type * as Undici from "undici";

const load = createRequire(import.meta.url);

/** undici's `Pool`: a set of `Client`s to one origin. */
export const Pool = load("undici/lib/dispatcher/pool.js") as typeof Undici.Pool;
/** undici's `Client`: one connection to one origin. */
export const Client = load("undici/lib/dispatcher/client.js") as typeof Undici.Client;
/** undici's `buildConnector`: opens TCP or TLS connections, with TLS sessions kept for reuse. */
export const buildConnector = load("undici/lib/core/connect.js") as typeof Undici.buildConnector;
