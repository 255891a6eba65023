/**
 * Reads the `.tar.gz` archive a Tinker server gives for sampler weights (a PEFT adapter folder on
 * SkyRL: `adapter_config.json`, `adapter_model.safetensors`) and writes its regular files.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';

const BLOCK = 512;

function field(header: Uint8Array, start: number, length: number): string {
  const bytes = header.subarray(start, start + length);
  const end = bytes.indexOf(0);
  return new TextDecoder().decode(end >= 0 ? bytes.subarray(0, end) : bytes);
}

/** The regular files of a (gzipped) ustar archive, by their path inside it. */
export function readTarGz(archive: Uint8Array): Map<string, Uint8Array> {
  const tar = archive[0] === 0x1f && archive[1] === 0x8b ? new Uint8Array(gunzipSync(archive)) : archive;
  const files = new Map<string, Uint8Array>();
  let longName: string | undefined;
  for (let offset = 0; offset + BLOCK <= tar.length; ) {
    const header = tar.subarray(offset, offset + BLOCK);
    if (header.every((byte) => byte === 0)) break;
    const size = Number.parseInt(field(header, 124, 12).trim() || '0', 8);
    if (!Number.isFinite(size) || size < 0) throw new Error(`Corrupt tar archive: bad size at byte ${offset}`);
    const type = String.fromCharCode(header[156] ?? 0);
    const prefix = field(header, 345, 155);
    const name = longName ?? (prefix ? `${prefix}/${field(header, 0, 100)}` : field(header, 0, 100));
    const body = tar.subarray(offset + BLOCK, offset + BLOCK + size);
    if (body.length < size) throw new Error(`Corrupt tar archive: ${name} is cut short`);
    longName = undefined;
    if (type === 'L') longName = new TextDecoder().decode(body).replace(/\0+$/, '');
    else if (type === '0' || type === '\0') files.set(name.replace(/^(\.?\/)+/, ''), body);
    offset += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
  }
  return files;
}

/** Writes an archive's regular files into `out` (no path may leave it); returns their names. */
export async function extractTarGz(archive: Uint8Array, out: string): Promise<string[]> {
  const root = path.resolve(out);
  const written: string[] = [];
  for (const [name, data] of readTarGz(archive)) {
    const target = path.resolve(root, name);
    if (target !== root && !target.startsWith(`${root}${path.sep}`))
      throw new Error(`The archive's entry ${JSON.stringify(name)} would be written outside ${root}`);
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(target, data);
    written.push(name);
  }
  return written.sort();
}
