/**
 * What SFT training data URLs may reach. A key grants the training API, nothing of the host: a
 * `file://` URL reads only the data directory's SFT files and the configured roots, `http(s)://`
 * is off unless enabled, and then never reaches loopback, link-local, private or other special
 * addresses unless they are allowed by name. URLs are redacted before any message repeats them.
 */
import { realpathSync } from 'node:fs';
import { BlockList, isIP } from 'node:net';
import { isAbsolute, relative, resolve, sep } from 'node:path';

/** The resolved access rules of one service. */
export interface TrainingDataAccess {
  /** Absolute data directory: its `<project>/models/<name>/sft-data/` files are always readable. */
  readonly dataDir: string;
  /** More directories (absolute) whose files `file://` URLs may read. */
  readonly roots: readonly string[];
  /** Whether `http://` and `https://` URLs are downloaded at all. */
  readonly downloads: boolean;
  /** Special addresses (loopback, private, ...) that downloads may reach anyway. */
  readonly allowedAddresses: BlockList;
  /** The allowed address entries as given, for messages. */
  readonly allowedAddressList: readonly string[];
}

/** Where the local backend writes SFT rows, relative to the data directory. */
const SFT_DATA_PATTERN = '<project>/models/<name>/sft-data/';

/**
 * Addresses a download never reaches unless allowed: this host, private networks, link-local
 * (cloud metadata at 169.254.169.254), carrier-grade NAT, multicast and reserved ranges.
 */
const SPECIAL_ADDRESSES = (() => {
  const list = new BlockList();
  for (const [network, prefix] of [
    ['0.0.0.0', 8],
    ['10.0.0.0', 8],
    ['100.64.0.0', 10],
    ['127.0.0.0', 8],
    ['169.254.0.0', 16],
    ['172.16.0.0', 12],
    ['192.0.0.0', 24],
    ['192.0.2.0', 24],
    ['192.168.0.0', 16],
    ['198.18.0.0', 15],
    ['198.51.100.0', 24],
    ['203.0.113.0', 24],
    ['224.0.0.0', 4],
    ['240.0.0.0', 4],
  ] as const)
    list.addSubnet(network, prefix, 'ipv4');
  for (const [network, prefix] of [
    ['::', 128],
    ['::1', 128],
    ['64:ff9b::', 96],
    ['64:ff9b:1::', 48],
    ['100::', 64],
    ['2001:db8::', 32],
    ['2002::', 16],
    ['fc00::', 7],
    ['fe80::', 10],
    ['fec0::', 10],
    ['ff00::', 8],
  ] as const)
    list.addSubnet(network, prefix, 'ipv6');
  return list;
})();

/** Options that decide {@link TrainingDataAccess}. */
export interface TrainingDataAccessOptions {
  readonly dataDir: string;
  readonly trainingDataRoots?: readonly string[] | undefined;
  readonly allowTrainingDataDownloads?: boolean | undefined;
  readonly trainingDataAllowedAddresses?: readonly string[] | undefined;
}

/** Resolves and checks the access options (bad entries throw before anything opens). */
export function resolveTrainingDataAccess(options: TrainingDataAccessOptions): TrainingDataAccess {
  const roots = (options.trainingDataRoots ?? []).map((root) => {
    if (typeof root !== 'string' || root === '')
      throw new TypeError(
        `Expected every entry of \`trainingDataRoots\` to be a directory path, got ${JSON.stringify(root)}`,
      );
    return resolve(root);
  });
  const allowedAddresses = new BlockList();
  const allowedAddressList = options.trainingDataAllowedAddresses ?? [];
  for (const entry of allowedAddressList) {
    const parsed = parseAddressRange(entry);
    if (parsed === undefined)
      throw new TypeError(
        `Expected every entry of \`trainingDataAllowedAddresses\` (--allow-training-data-address) to be an IP address or a CIDR range (e.g. '127.0.0.1', '10.0.0.0/8', 'fd00::/8'), got ${JSON.stringify(entry)}`,
      );
    allowedAddresses.addSubnet(parsed.address, parsed.prefix, parsed.family);
  }
  return {
    dataDir: resolve(options.dataDir),
    roots,
    downloads: options.allowTrainingDataDownloads ?? false,
    allowedAddresses,
    allowedAddressList,
  };
}

function parseAddressRange(entry: unknown): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | undefined {
  if (typeof entry !== 'string') return undefined;
  const [address = '', prefixText, extra] = entry.split('/');
  const version = isIP(address);
  if (version === 0 || extra !== undefined) return undefined;
  const bits = version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? bits : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : Number.NaN;
  if (!(prefix >= 0 && prefix <= bits)) return undefined;
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

/**
 * Why a download may not reach `address` (an IP literal), or undefined when it may: special
 * addresses are refused unless `trainingDataAllowedAddresses` covers them.
 */
export function refusedAddress(access: TrainingDataAccess, address: string): string | undefined {
  const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
  if (!SPECIAL_ADDRESSES.check(address, family)) return undefined;
  if (access.allowedAddresses.check(address, family)) return undefined;
  return `${address} is a loopback, private, link-local or reserved address, which training data downloads do not reach unless allowed (--allow-training-data-address, option trainingDataAllowedAddresses)`;
}

/**
 * Why `file://` may not read `path` (absolute), or undefined when it may. `realPath` also checks
 * where symbolic links lead (the file must exist then); without it, only the path as written.
 */
export function refusedPath(access: TrainingDataAccess, path: string, realPath = false): string | undefined {
  const allowed = (candidate: string, dataDir: string, roots: readonly string[]): boolean =>
    isSftDataFile(dataDir, candidate) || roots.some((root) => isInside(root, candidate));
  if (!allowed(path, access.dataDir, access.roots)) return refusal(access);
  if (!realPath) return undefined;
  const real = realpathSync(path);
  const realDataDir = realOrSelf(access.dataDir);
  const realRoots = access.roots.map(realOrSelf);
  return allowed(real, realDataDir, realRoots) ? undefined : `${refusal(access)} (it is a link that leads elsewhere)`;
}

function refusal(access: TrainingDataAccess): string {
  const roots = access.roots.length === 0 ? 'none configured' : access.roots.join(', ');
  return (
    `the service reads file:// training data only from its data directory's SFT files (${access.dataDir}${sep}${SFT_DATA_PATTERN}) ` +
    `and its training data roots (${roots}; add one with --training-data-root DIR, option trainingDataRoots)`
  );
}

function isSftDataFile(dataDir: string, path: string): boolean {
  if (!isInside(dataDir, path)) return false;
  const segments = relative(dataDir, path).split(sep);
  return segments.length >= 5 && segments[1] === 'models' && segments[3] === 'sft-data';
}

function isInside(directory: string, path: string): boolean {
  const rest = relative(directory, path);
  return rest !== '' && !rest.startsWith('..') && !isAbsolute(rest);
}

function realOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/** Query parameter names that look like credentials (tokens, keys, signatures, passwords). */
const CREDENTIAL_PARAMETER = /token|key|secret|passw|pwd|signature|^sig$|auth|credential|session|^code$/i;

/**
 * `url` fit to repeat in a message or a log line: no user name or password, credential-looking
 * query values replaced with `REDACTED`, and `data:` URLs cut to their media type.
 * @example
 * redactUrl('https://me:pw@host/rows.jsonl?token=abc&v=2'); // 'https://REDACTED@host/rows.jsonl?token=REDACTED&v=2'
 */
export function redactUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return '(not a URL)';
  }
  if (parsed.protocol === 'data:') {
    // The media type only: the data may be anything.
    const comma = url.indexOf(',');
    return `data:${url.slice(5, comma < 0 ? 5 : Math.min(comma, 105))},...`;
  }
  const hadUser = parsed.username !== '' || parsed.password !== '';
  parsed.username = '';
  parsed.password = '';
  for (const name of new Set(parsed.searchParams.keys()))
    if (CREDENTIAL_PARAMETER.test(name)) parsed.searchParams.set(name, 'REDACTED');
  let text = parsed.href;
  if (hadUser) text = text.replace('//', '//REDACTED@');
  return text;
}
