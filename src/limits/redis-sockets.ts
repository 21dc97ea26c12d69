/**
 * Connectors that keep an 'error' listener on every socket ioredis opens, for the life of the
 * socket.
 *
 * ioredis listens to its socket with `once("error")` only. A TLS socket whose handshake already
 * finished reports a TLS fault (a peer's alert, a corrupt record) as an 'error' without
 * destroying itself, which uses up those listeners; the reset that usually follows is a second
 * 'error' with no listener, and Node turns it into an uncaught exception. ioredis has reported
 * the first error already, so the later ones are dropped here.
 */
import { SentinelConnector, type RedisOptions } from "ioredis";
import standalone, {
  type StandaloneConnectionOptions,
} from "ioredis/built/connectors/StandaloneConnector.js";

// ioredis exports the Sentinel connector but not this one: it is the default of its module.
const StandaloneConnector = standalone.default;

type Stream = Awaited<ReturnType<SentinelConnector["connect"]>>;

const ignore = (): void => undefined;

function guarded(stream: Stream): Stream {
  stream.on("error", ignore);
  return stream;
}

/** The connector of one server or of a Cluster node, its sockets always listened to. */
class GuardedStandaloneConnector extends StandaloneConnector {
  // ioredis hands every connector the connection's options, typed loosely.
  constructor(options: unknown) {
    super(options as StandaloneConnectionOptions);
  }

  override async connect(...args: Parameters<SentinelConnector["connect"]>): Promise<Stream> {
    return guarded(await super.connect(...args));
  }
}

/** The connector of a primary found through Sentinel, its sockets always listened to. */
class GuardedSentinelConnector extends SentinelConnector {
  constructor(options: unknown) {
    super(options as ConstructorParameters<typeof SentinelConnector>[0]);
  }

  override async connect(...args: Parameters<SentinelConnector["connect"]>): Promise<Stream> {
    return guarded(await super.connect(...args));
  }
}

/** The ioredis `Connector` option that keeps every socket of a connection listened to. */
export function guardedConnector(sentinel: boolean): RedisOptions["Connector"] {
  return sentinel ? GuardedSentinelConnector : GuardedStandaloneConnector;
}
