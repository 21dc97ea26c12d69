/**
 * TLS for the Redis servers the tests start: a CA and a server certificate made here with openssl,
 * the arguments of a server speaking only TLS, and a TLS-only server of the test's own.
 */
import { execFile, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { promisify } from "node:util";
import { refusingPort } from "./ports.js";
import { launchRedis, serverArgs, stopProcess } from "./redis.js";

const run = promisify(execFile);

/** The name on every server certificate made here. */
export const SERVER_NAME = "redis.gatehouse.test";

/** A CA and a server certificate it signed, as files in one folder. */
export interface Certificates {
  /** The CA bundle, PEM. */
  readonly ca: string;
  readonly caFile: string;
  readonly certFile: string;
  readonly keyFile: string;
}

/**
 * Makes a CA and a server certificate in `dir` with openssl. The certificate names `name`
 * (SERVER_NAME unless given), and also 127.0.0.1 when `ip` is set.
 */
export async function makeCertificates(dir: string, options: { ip: boolean; name?: string }) {
  const name = options.name ?? SERVER_NAME;
  const openssl = (...args: string[]) => run("openssl", args, { cwd: dir });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"];
  const caExtensions = ["basicConstraints=critical,CA:TRUE", "keyUsage=keyCertSign"];
  await openssl(
    "req",
    "-x509",
    ...ec,
    "-keyout",
    "ca.key",
    "-out",
    "ca.pem",
    "-subj",
    "/CN=test CA",
    ...caExtensions.flatMap((extension) => ["-addext", extension]),
  );
  await openssl(
    "req",
    ...ec,
    "-keyout",
    "server.key",
    "-out",
    "server.csr",
    "-subj",
    `/CN=${name}`,
  );
  const names = `DNS:${name}${options.ip ? ",IP:127.0.0.1" : ""}`;
  await writeFile(
    join(dir, "server.ext"),
    `subjectAltName=${names}\nextendedKeyUsage=serverAuth,clientAuth\n`,
  );
  await openssl(
    "x509",
    "-req",
    "-in",
    "server.csr",
    "-CA",
    "ca.pem",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    "-out",
    "server.pem",
    "-days",
    "2",
    "-extfile",
    "server.ext",
  );
  const certificates: Certificates = {
    ca: await readFile(join(dir, "ca.pem"), "utf8"),
    caFile: join(dir, "ca.pem"),
    certFile: join(dir, "server.pem"),
    keyFile: join(dir, "server.key"),
  };
  return certificates;
}

/** The arguments of a server that speaks only TLS, on `port`. */
export function tlsServerArgs(port: number, certs: Certificates): string[] {
  return [
    ...serverArgs(0),
    ...["--tls-port", String(port), "--tls-auth-clients", "no", "--tls-ca-cert-file", certs.caFile],
    ...["--tls-cert-file", certs.certFile, "--tls-key-file", certs.keyFile],
  ];
}

/** Whether a PING over TLS on `port`, verified with `ca` under SERVER_NAME, gets PONG. */
export function tlsAnswers(port: number, ca: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tlsConnect({ port, host: "127.0.0.1", ca, servername: SERVER_NAME });
    socket.setTimeout(500, () => socket.destroy());
    // "on": a handshake can fail twice (the alert, then the reset), and both are answers.
    socket.on("error", () => resolve(false));
    socket.once("close", () => resolve(false));
    socket.once("secureConnect", () => socket.write("PING\r\n"));
    socket.once("data", (data) => {
      resolve(data.toString("latin1").startsWith("+PONG"));
      socket.destroy();
    });
  });
}

/**
 * Why TLS cannot be tried here (openssl missing, redis-server built without TLS), or undefined
 * when it can.
 */
export async function tlsUnavailable(): Promise<string | undefined> {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-tls-check-"));
  try {
    const certs = await makeCertificates(dir, { ip: false }).catch((error: Error) => error);
    if (certs instanceof Error) {
      return `openssl could not make certificates (${certs.message.split("\n")[0]})`;
    }
    const port = await refusingPort();
    const child = await launchRedis(tlsServerArgs(port, certs), () =>
      tlsAnswers(port, certs.ca),
    ).catch((error: Error) => error);
    if (!(child instanceof Error)) {
      await stopProcess(child, "SIGKILL");
      return undefined;
    }
    if (/exited with .*(Bad directive|not supported)/is.test(child.message)) {
      return "this redis-server was built without TLS (--tls-port is not a known option)";
    }
    throw child;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A server speaking only TLS, with the CA that verifies it. */
export interface TlsRedis {
  readonly url: string;
  /** The CA bundle, PEM. */
  readonly ca: string;
  close(): Promise<void>;
}

/** Starts a TLS-only server whose certificate names only SERVER_NAME (not 127.0.0.1). */
export async function startTlsRedis(): Promise<TlsRedis> {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-tls-"));
  let child: ChildProcess | undefined;
  const close = async () => {
    if (child !== undefined) await stopProcess(child, "SIGKILL");
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const certs = await makeCertificates(dir, { ip: false });
    const port = await refusingPort();
    child = await launchRedis(tlsServerArgs(port, certs), () => tlsAnswers(port, certs.ca));
    return { url: `rediss://127.0.0.1:${port}`, ca: certs.ca, close };
  } catch (error) {
    await close();
    throw error;
  }
}
