/**
 * `npm run demo`: a small example upstream on 127.0.0.1:3000 and gatehouse in front of it with the
 * example config, plus a few curl lines to try. Ctrl-C stops both.
 */
import { createServer } from "node:http";
import { startGatehouse } from "./server.js";

const DEMO_CLIENT = "reporting-app";
const DEMO_SECRET = "demo-reporting-app-secret-7f3a9c2e";

// The legacy API: it knows nothing of tokens or limits and answers with what it received.
const upstream = createServer((req, res) => {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(
    JSON.stringify({
      method: req.method,
      url: req.url,
      client: req.headers["x-client-id"] ?? null,
      language: req.headers["accept-language"] ?? null,
    }),
  );
});
await new Promise<void>((done) => upstream.listen(3000, "127.0.0.1", done));

const gatehouse = await startGatehouse({
  configPath: process.env.GATEHOUSE_CONFIG ?? "proxy.config.yaml",
});
const base = `http://127.0.0.1:${gatehouse.address.port}`;
process.stderr.write(`
gatehouse is listening on ${base}, in front of the example upstream on http://127.0.0.1:3000.
Try:

  curl -i ${base}/status
  TOKEN=$(curl -s -u ${DEMO_CLIENT}:${DEMO_SECRET} -d grant_type=client_credentials ${base}/oauth/token | node -pe 'JSON.parse(require("fs").readFileSync(0)).access_token')
  curl -i -H "Authorization: Bearer $TOKEN" -H "Accept-Language: fr-CA,fr;q=0.9" "${base}/v1/items?translation_language=DE,it-CH"
  curl -i ${base}/v1/items
  curl -i ${base}/admin
  curl -s http://127.0.0.1:${gatehouse.adminAddress.port}/metrics | grep gatehouse_requests_total

Ctrl-C stops the demo.
`);

const stop = () => {
  void gatehouse.shutdown().then(() => upstream.close(() => process.exit(0)));
};
process.once("SIGINT", stop);
process.once("SIGTERM", stop);
