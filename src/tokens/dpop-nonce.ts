/**
 * DPoP nonces (RFC 9449 §8 and §9) that every replica makes and accepts without shared state: a
 * nonce is its time slot and a MAC of that slot under a secret the replicas share, good in the
 * slot it was made in and the next one.
 */
import { createHmac, hkdfSync, timingSafeEqual } from "node:crypto";
import type { KeyMaterial } from "./keys.js";

/** The nonces of one configuration. */
export interface DpopNonces {
  /** The nonce a client is given at `nowMs` (epoch ms), in a `DPoP-Nonce` header. */
  current(nowMs: number): string;
  /** Whether `nonce` was made in the slot of `nowMs` or in the slot before. */
  accepts(nonce: unknown, nowMs: number): boolean;
}

/** The bytes of a nonce's slot number (big-endian) and of its MAC. */
const SLOT_BYTES = 6;
const MAC_BYTES = 16;
/** A nonce's length in base64url characters. */
const NONCE_LENGTH = Math.ceil(((SLOT_BYTES + MAC_BYTES) * 4) / 3);

/** Nonces made with `secret`, each slot `slotMs` long. */
export function createDpopNonces(secret: Uint8Array, slotMs: number): DpopNonces {
  const mac = (slot: number): Buffer => {
    const bytes = Buffer.alloc(SLOT_BYTES);
    bytes.writeUIntBE(slot, 0, SLOT_BYTES);
    return createHmac("sha256", secret).update(bytes).digest().subarray(0, MAC_BYTES);
  };
  const make = (slot: number): string => {
    const bytes = Buffer.alloc(SLOT_BYTES + MAC_BYTES);
    bytes.writeUIntBE(slot, 0, SLOT_BYTES);
    mac(slot).copy(bytes, SLOT_BYTES);
    return bytes.toString("base64url");
  };
  // The current slot's nonce is made once per slot.
  let made = { slot: -1, nonce: "" };
  const slotOf = (nowMs: number): number => Math.floor(nowMs / slotMs);
  return {
    current(nowMs) {
      const slot = slotOf(nowMs);
      if (made.slot !== slot) made = { slot, nonce: make(slot) };
      return made.nonce;
    },
    accepts(nonce, nowMs) {
      if (typeof nonce !== "string" || nonce.length !== NONCE_LENGTH) return false;
      const bytes = Buffer.from(nonce, "base64url");
      if (bytes.length !== SLOT_BYTES + MAC_BYTES || bytes.toString("base64url") !== nonce) {
        return false;
      }
      const slot = bytes.readUIntBE(0, SLOT_BYTES);
      const now = slotOf(nowMs);
      if (slot !== now && slot !== now - 1) return false;
      return timingSafeEqual(bytes.subarray(SLOT_BYTES), mac(slot));
    },
  };
}

/**
 * The nonce secret derived from a signing key (its PKCS#8 bytes, or an HS256 secret): every
 * replica with the same key derives the same secret, and the key cannot be recovered from it.
 */
export async function nonceSecretOf(key: KeyMaterial): Promise<Uint8Array> {
  const material =
    key instanceof Uint8Array ? key : new Uint8Array(await crypto.subtle.exportKey("pkcs8", key));
  return new Uint8Array(
    hkdfSync("sha256", material, new Uint8Array(0), "gatehouse dpop nonce", 32),
  );
}
