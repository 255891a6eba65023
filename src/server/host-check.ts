/**
 * Which `Host` names the listening service answers, and which interfaces count as loopback. A web
 * page can make a browser send requests to 127.0.0.1 under its own name (DNS rebinding); checking
 * the `Host` header against the names the service listens on stops that on the server side.
 */
import { hostname, networkInterfaces } from 'node:os';
import { isIP } from 'node:net';

/** Names always answered on a loopback bind. */
const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]'];

/** Whether `host` (as given to `listen`) is a loopback interface: `localhost`, `127.x.x.x` or `::1`. */
export function isLoopbackHost(host: string): boolean {
  const name = normalizeName(host);
  if (name === 'localhost' || name === '[::1]') return true;
  return isIP(name) === 4 && name.startsWith('127.');
}

/** Whether `host` listens on every interface (`0.0.0.0`, `::`). */
function isWildcardHost(host: string): boolean {
  const name = normalizeName(host);
  return name === '0.0.0.0' || name === '[::]' || name === '';
}

/**
 * Decides which `Host` headers a service listening on `listenHost` answers: the name it listens
 * on; on a loopback bind also `localhost`, `127.0.0.1` and `[::1]`; on a wildcard bind
 * (`0.0.0.0`, `::`) every address of this machine's interfaces and its host name; plus
 * `allowedHosts` (a `*` entry answers every name). Any port.
 */
export class HostCheck {
  private readonly names = new Set<string>();
  private readonly wildcard: boolean;
  private readonly anyName: boolean;

  constructor(listenHost: string, allowedHosts: readonly string[]) {
    this.anyName = allowedHosts.includes('*');
    this.wildcard = isWildcardHost(listenHost);
    this.names.add(normalizeName(listenHost));
    if (isLoopbackHost(listenHost) || this.wildcard) for (const name of LOOPBACK_NAMES) this.names.add(name);
    if (this.wildcard) this.names.add(normalizeName(hostname()));
    for (const name of allowedHosts) this.names.add(normalizeName(name));
  }

  /** Whether a request with this `Host` header value is answered. */
  allows(hostHeader: string): boolean {
    if (this.anyName) return true;
    const name = hostName(hostHeader);
    if (name === undefined) return false;
    if (this.names.has(name)) return true;
    // Interfaces come and go (a VPN, DHCP): read them again on a miss.
    return this.wildcard && interfaceAddresses().has(name);
  }

  /** The names answered, for an error message. */
  describe(): string {
    return this.anyName ? 'any name' : [...this.names].join(', ');
  }
}

/** Checks `--allowed-host` / `allowedHosts` entries: names or addresses, without scheme, path or port. */
export function checkAllowedHosts(allowedHosts: readonly string[]): void {
  for (const entry of allowedHosts) {
    if (typeof entry !== 'string' || (entry !== '*' && hostName(entry) !== entry.toLowerCase().replace(/\.$/, '')))
      throw new TypeError(
        `Expected every entry of \`allowedHosts\` (--allowed-host) to be a host name or address without port (e.g. 'mybox.lan', '192.168.1.5', '[fd00::1]') or '*', got ${JSON.stringify(entry)}`,
      );
  }
}

/** The host name of a `Host` header (lower case, no port, no trailing dot), or undefined when malformed. */
function hostName(header: string): string | undefined {
  const value = header.trim().toLowerCase();
  let name: string;
  let rest: string;
  if (value.startsWith('[')) {
    const end = value.indexOf(']');
    if (end < 0) return undefined;
    name = value.slice(0, end + 1);
    rest = value.slice(end + 1);
    if (isIP(name.slice(1, -1)) !== 6) return undefined;
  } else {
    const colon = value.indexOf(':');
    name = colon < 0 ? value : value.slice(0, colon);
    rest = colon < 0 ? '' : value.slice(colon);
  }
  if (rest !== '' && !/^:\d{1,5}$/.test(rest)) return undefined;
  name = name.replace(/\.$/, '');
  if (name === '' || !/^(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)$/.test(name)) return undefined;
  return name;
}

/** A listen host as a `Host` name: lower case, IPv6 in brackets, no trailing dot. */
function normalizeName(host: string): string {
  const name = host.trim().toLowerCase().replace(/\.$/, '');
  if (name.startsWith('[')) return name;
  return isIP(name) === 6 ? `[${name}]` : name;
}

function interfaceAddresses(): Set<string> {
  const addresses = new Set<string>();
  for (const list of Object.values(networkInterfaces())) {
    for (const address of list ?? []) addresses.add(normalizeName(address.address.replace(/%.*$/, '')));
  }
  return addresses;
}
