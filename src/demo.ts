/**
 * `npm run demo`: gatehouse with the example config, a small example upstream where the config's
 * `upstream.url` points (127.0.0.1:3000 in the example), and a few curl lines to try. Ctrl-C stops
 * both. A port already taken is explained in one line, and the demo exits 1.
 */
import { createServer, type Server } from "node:http";
import { ConfigError } from "./config/load.js";
import { configErrorText } from "./cli/serve.js";
import { ListenError } from "./http/listen.js";
import { startGatehouse, type Gatehouse } from "./server.js";

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

// Ends the demo with one line on stderr: a problem the user can fix is not a crash.
function fail(line: string): never {
  process.stderr.write(line);
  process.exit(1);
}

async function startProxy(configPath: string): Promise<Gatehouse> {
  try {
    return await startGatehouse({ configPath });
  } catch (error) {
    if (error instanceof ConfigError) fail(configErrorText(error));
    if (error instanceof ListenError) fail(`demo: ${error.message}\n`);
    throw error;
  }
}

// The example upstream listens where the config sends requests.
function listenAsUpstream(server: Server, url: URL, configPath: string): Promise<void> {
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
  return new Promise((done, failed) => {
    server.once("error", (error: NodeJS.ErrnoException) =>
      error.code === "EADDRINUSE" || error.code === "EACCES" || error.code === "EADDRNOTAVAIL"
        ? failed(
            new Error(
              `demo: the example upstream cannot listen on ${url.host} (${error.code}), where ` +
                `upstream.url in ${configPath} points: stop what listens there, or run the demo on a ` +
                `copy whose upstream.url names a free port (GATEHOUSE_CONFIG=copy.yaml npm run demo)\n`,
            ),
          )
        : failed(error),
    );
    server.listen(port, host, () => done());
  });
}

const configPath = process.env.GATEHOUSE_CONFIG || "proxy.config.yaml";
const gatehouse = await startProxy(configPath);
const upstreamUrl = gatehouse.config().upstream.url;
await listenAsUpstream(upstream, upstreamUrl, configPath).catch(async (error: Error) => {
  await gatehouse.shutdown();
  fail(error.message);
});

const base = `http://127.0.0.1:${gatehouse.address.port}`;
process.stderr.write(`
gatehouse is listening on ${base}, in front of the example upstream on ${upstreamUrl.origin}.
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
