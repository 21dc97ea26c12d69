/**
 * Node's http and https modules, loaded with require. On Node 24, importing node:http as an ES
 * module builds its module facade by reading every export, and one of them (WebSocket) loads
 * Node's whole fetch client, undici: about 50 ms of every start, for nothing gatehouse uses.
 * Types still come from `import type`.
 */
import { createRequire } from "node:module";
import type * as Http from "node:http";
import type * as Https from "node:https";

const load = createRequire(import.meta.url);

export const http = load("node:http") as typeof Http;
export const https = load("node:https") as typeof Https;
