/**
 * Counter keys for client addresses, used by the anonymous plan and the failure limit: one per
 * IPv4 address, one per IPv6 /64.
 */
import { isIPv4, isIPv6 } from "node:net";

// Expands an IPv6 address (zone removed) into its eight 16-bit groups.
function ipv6Groups(address: string): number[] {
  const [head = "", tail] = address.split("::");
  const parse = (part: string): number[] => {
    if (part === "") return [];
    const groups: number[] = [];
    for (const piece of part.split(":")) {
      if (piece.includes(".")) {
        const [a = 0, b = 0, c = 0, d = 0] = piece.split(".").map(Number);
        groups.push((a << 8) | b, (c << 8) | d);
      } else {
        groups.push(parseInt(piece, 16));
      }
    }
    return groups;
  };
  const first = parse(head);
  if (tail === undefined) return first;
  const last = parse(tail);
  return [...first, ...new Array<number>(8 - first.length - last.length).fill(0), ...last];
}

/**
 * The counter key for a client address. IPv4-mapped IPv6 is the IPv4 address (
 * never a /64 shared by every IPv4 client); other IPv6 addresses are grouped by /64, the block one
 * subscriber is handed (RFC 6177), so rotating inside it does not buy fresh counters.
 */
export function addressKey(address: string): string {
  if (isIPv4(address)) return `ip:${address}`;
  const bare = address.split("%")[0] as string;
  if (!isIPv6(bare)) return `ip:${address}`;
  const groups = ipv6Groups(bare);
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    const [hi = 0, lo = 0] = groups.slice(6);
    return `ip:${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return `ip:${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(":")}::/64`;
}
