// Job IDs with 128 random bits (the Go client's NewJobID).

import { randomBytes } from 'node:crypto';
import { InvalidInputError } from './errors';
import { ID_PATTERN, MAX_ID_LENGTH } from './validate';

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
const RANDOM_ID_LENGTH = 26;

/** Lower-case base32 without padding: 16 bytes are 26 characters, all valid in an ID. */
function base32(bytes: Uint8Array): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) {
    out += BASE32[(value << (5 - bits)) & 31];
  }
  return out;
}

/**
 * Makes a job ID no other submission will have: the prefix (for people reading logs; none when
 * empty), a dash, and 128 random bits in lower-case base32. Make it once per job, save it with the
 * job's body ({@link Client.track}) and send every retry under it: an ID once accepted belongs to
 * its job for ever, so a predictable one (a timestamp, a counter) can collide with another job and
 * answer that job instead of charging this one.
 */
export function newJobId(prefix = ''): string {
  const random = base32(randomBytes(16));
  if (prefix === '') {
    return random;
  }
  const id = `${prefix}-${random}`;
  if (id.length > MAX_ID_LENGTH) {
    throw new InvalidInputError(
      `prefix ${JSON.stringify(prefix)} is ${prefix.length} bytes; with the random part a job ID may take at most ${MAX_ID_LENGTH - RANDOM_ID_LENGTH - 1}`,
    );
  }
  if (!ID_PATTERN.test(id)) {
    throw new InvalidInputError(
      `prefix ${JSON.stringify(prefix)} may hold only letters, digits and . _ : - and must start with a letter or digit`,
    );
  }
  return id;
}
