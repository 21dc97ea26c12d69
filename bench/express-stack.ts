/**
 * What a team would write instead of gatehouse, run in its own process: Express, jose verifying
 * the Bearer token gatehouse issued (EdDSA, the run's signing key) and checking its scope, a
 * language negotiated from Accept-Language, express-rate-limit counting a burst and a sustained
 * limit per client in memory, and http-proxy-middleware forwarding on a keep-alive agent. The
 * `full` request does the same work through gatehouse.
 */
import { createPublicKey } from "node:crypto";
import { readFileSync } from "node:fs";
import { Agent } from "node:http";
import type { AddressInfo } from "node:net";
import express, { type NextFunction, type Request, type Response } from "express";
import { rateLimit } from "express-rate-limit";
import { createProxyMiddleware } from "http-proxy-middleware";
import { jwtVerify } from "jose";

const [target, keyFile, scope] = process.argv.slice(2);
if (target === undefined || keyFile === undefined || scope === undefined) {
  throw new Error("usage: express-stack.js UPSTREAM_URL SIGNING_KEY_FILE SCOPE");
}
const publicKey = createPublicKey(readFileSync(keyFile));
const SUPPORTED = ["en", "fr", "de"];

const app = express();
app.disable("x-powered-by");
app.disable("etag");

app.use(async (req: Request, res: Response, next: NextFunction) => {
  const match = /^Bearer (\S+)$/.exec(req.headers.authorization ?? "");
  if (match === null) {
    res.status(401).json({ error: "invalid_token" });
    return;
  }
  try {
    const { payload } = await jwtVerify(match[1] as string, publicKey);
    const granted = typeof payload.scope === "string" ? payload.scope.split(" ") : [];
    if (!granted.includes(scope)) {
      res.status(403).json({ error: "insufficient_scope" });
      return;
    }
    res.locals.client = payload.client_id;
    next();
  } catch {
    res.status(401).json({ error: "invalid_token" });
  }
});

app.use((req: Request, _res: Response, next: NextFunction) => {
  const wanted = (req.headers["accept-language"] ?? "").split(",");
  const found = wanted
    .map((range) => range.split(";")[0]?.trim().toLowerCase().split("-")[0] ?? "")
    .find((tag) => SUPPORTED.includes(tag));
  req.headers["accept-language"] = found ?? "en";
  next();
});

const perClient = (req: Request, res: Response) => String(res.locals.client ?? req.ip);
// As the `full` request's plan: a burst and a sustained limit that the bench never reaches.
app.use(rateLimit({ windowMs: 1000, limit: 1e12, keyGenerator: perClient, standardHeaders: true }));
app.use(
  rateLimit({ windowMs: 3_600_000, limit: 1e12, keyGenerator: perClient, standardHeaders: true }),
);

app.use(
  createProxyMiddleware({
    target,
    agent: new Agent({ keepAlive: true, maxSockets: 256 }),
    xfwd: true,
  }),
);

const server = app.listen(0, "127.0.0.1", () => {
  process.send?.({ port: (server.address() as AddressInfo).port });
});
// Ends with the benchmark, even when the benchmark itself was killed.
process.on("disconnect", () => process.exit(0));
process.on("SIGTERM", () => process.exit(0));
