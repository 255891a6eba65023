/** Base URL normalisation and request URL building. */
import { invalidOption } from '../internal/option-schema.js';

/**
 * Normalises a base URL: no trailing slash, and ending in `/v1` (appended when missing, since
 * every path of the contract starts with `/v1` and operations are relative to it).
 */
export function normalizeBaseURL(raw: string, option: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalidOption(option, raw, 'an absolute http(s) URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw invalidOption(option, raw, 'an http(s) URL');
  }
  // Query and fragment would be lost when paths are appended; keep only origin and path.
  const path = url.pathname.replace(/\/+$/, '');
  return `${url.origin}${path.endsWith('/v1') ? path : `${path}/v1`}`;
}

/** `base + path + ?query`, leaving out undefined query values. */
export function buildURL(base: string, path: string, query?: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined) search.append(key, String(value));
  }
  const text = search.toString();
  return `${base}${path}${text === '' ? '' : `?${text}`}`;
}
