/** Upstream settings, ready for the forwarder. */
export interface UpstreamSettings {
  readonly url: URL;
  readonly timeoutMs: number;
  readonly maxSockets: number;
  /** How long a pooled connection may stay idle before gatehouse closes it. */
  readonly idleTimeoutMs: number;
  /** The name an https upstream is asked for (SNI) and checked against; its host when unset. */
  readonly serverName: string | undefined;
  /** Lower-case name of the header carrying the client id. */
  readonly identityHeader: string;
  /** Lower-case name of the header carrying the granted scopes; "" for none. */
  readonly scopesHeader: string;
  /** Lower-case name of the header carrying the token's issuer name; "" for none. */
  readonly issuerHeader: string;
  readonly forwardAuthorization: boolean;
  /**
   * `underscore_headers: keep`: request headers with `_` in their name are forwarded, but for
   * those that would alias a header gatehouse owns.
   */
  readonly keepUnderscoreHeaders: boolean;
  /** A WebSocket connection with no frame either way for this long is closed. */
  readonly websocketIdleMs: number;
  /**
   * `upstream.websocket.max_connections`: open WebSocket connections of this process, counted
   * apart from `max_connections`.
   */
  readonly websocketMaxConnections: number;
}
