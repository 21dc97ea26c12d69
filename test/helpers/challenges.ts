/**
 * The DPoP challenge every bearer route's 401 and 403 carry after the Bearer one (RFC 9449 §7.1),
 * with the default proof algorithms.
 */
export const DPOP_CHALLENGE = 'DPoP algs="ES256 EdDSA PS256 RS256"';

/** `bearer`, a Bearer challenge, followed by the DPoP challenge, as one field value. */
export function withDpop(bearer: string): string {
  return `${bearer}, ${DPOP_CHALLENGE}`;
}
