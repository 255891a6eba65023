/**
 * The sampler-weights archive a Tinker server gives (`.tar.gz`, a PEFT adapter folder on SkyRL),
 * read without a tar dependency: archives made here by the system `tar`, in GNU and POSIX ustar
 * formats, come out file for file; an entry that would land outside the output folder is refused.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { extractTarGz, readTarGz } from '../../src/backends/tinker/archive.js';

let work: string;

beforeEach(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'policyloop-tinker-archive-'));
});

afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

/** A deep file name longer than the 100 bytes of a tar header's name field. */
const LONG_NAME = `${'nested-folder-with-a-long-name/'.repeat(4)}adapter_model.safetensors`;

/** Writes an adapter folder as SkyRL saves one (plus a long name), returning its files' contents. */
async function adapterFolder(): Promise<Map<string, Buffer>> {
  const folder = path.join(work, 'adapter');
  const files = new Map<string, Buffer>([
    ['adapter_config.json', Buffer.from(JSON.stringify({ r: 4, lora_alpha: 32, peft_type: 'LORA' }))],
    // Binary weights of a size that is not a multiple of 512 bytes, with zero bytes inside.
    ['adapter_model.safetensors', Buffer.concat([randomBytes(1500), Buffer.alloc(37), randomBytes(3)])],
    ['empty.txt', Buffer.alloc(0)],
    [LONG_NAME, randomBytes(700)],
  ]);
  for (const [name, data] of files) {
    await mkdir(path.dirname(path.join(folder, name)), { recursive: true });
    await writeFile(path.join(folder, name), data);
  }
  return files;
}

/** Runs the system `tar` in the work folder. */
function tar(...args: string[]): void {
  execFileSync('tar', args, { cwd: work, stdio: 'pipe' });
}

describe('readTarGz and extractTarGz', () => {
  for (const format of ['gnu', 'ustar'] as const) {
    it(`read every regular file of a tar.gz made by the system tar (${format} format), long names included`, async () => {
      const files = await adapterFolder();
      tar(`--format=${format}`, '-czf', 'adapter.tar.gz', '-C', 'adapter', '.');
      const archive = new Uint8Array(await readFile(path.join(work, 'adapter.tar.gz')));
      const read = readTarGz(archive);
      // Folders are not files; `./` prefixes are dropped.
      expect([...read.keys()].sort()).toEqual([...files.keys()].sort());
      for (const [name, data] of files) expect(Buffer.from(read.get(name) ?? []).equals(data)).toBe(true);

      const out = path.join(work, 'out');
      const written = await extractTarGz(archive, out);
      expect(written).toEqual([...files.keys()].sort());
      for (const [name, data] of files) expect((await readFile(path.join(out, name))).equals(data)).toBe(true);
    });
  }

  it('reads an uncompressed tar too', async () => {
    const files = await adapterFolder();
    tar('-cf', 'adapter.tar', '-C', 'adapter', 'adapter_config.json');
    const read = readTarGz(new Uint8Array(await readFile(path.join(work, 'adapter.tar'))));
    expect(Buffer.from(read.get('adapter_config.json') ?? []).equals(files.get('adapter_config.json') as Buffer)).toBe(
      true,
    );
  });

  it('refuses an entry whose path climbs out of the output folder, and writes nothing outside', async () => {
    await mkdir(path.join(work, 'inside'));
    await writeFile(path.join(work, 'escape.txt'), 'pwned');
    // -P keeps the leading ../ in the member name, as a hostile archive would have it.
    tar('-czPf', 'evil.tar.gz', '-C', 'inside', '../escape.txt');
    await rm(path.join(work, 'escape.txt'));
    const archive = new Uint8Array(await readFile(path.join(work, 'evil.tar.gz')));
    expect([...readTarGz(archive).keys()]).toEqual(['../escape.txt']);

    const out = path.join(work, 'out');
    await expect(extractTarGz(archive, out)).rejects.toThrow(
      `The archive's entry "../escape.txt" would be written outside ${out}`,
    );
    expect(existsSync(path.join(work, 'escape.txt'))).toBe(false);
  });

  it('writes an absolute entry path inside the output folder (its leading / dropped, as tar does), never at that path', async () => {
    const target = path.join(work, 'absolute.txt');
    await writeFile(target, 'from an absolute path');
    tar('-czPf', 'absolute.tar.gz', target);
    await rm(target);
    const out = path.join(work, 'out');
    const written = await extractTarGz(new Uint8Array(await readFile(path.join(work, 'absolute.tar.gz'))), out);
    const inside = target.replace(/^\/+/, '');
    expect(written).toEqual([inside]);
    expect(await readFile(path.join(out, inside), 'utf8')).toBe('from an absolute path');
    expect(existsSync(target)).toBe(false);
  });

  it('writes no symbolic link (only regular files come out)', async () => {
    const folder = path.join(work, 'links');
    await mkdir(folder);
    await writeFile(path.join(folder, 'real.txt'), 'real');
    await symlink('/etc/hostname', path.join(folder, 'link'));
    tar('-czf', 'links.tar.gz', '-C', 'links', '.');
    const out = path.join(work, 'out');
    const written = await extractTarGz(new Uint8Array(await readFile(path.join(work, 'links.tar.gz'))), out);
    expect(written).toEqual(['real.txt']);
    expect(existsSync(path.join(out, 'link'))).toBe(false);
  });

  it('says the archive is corrupt when it is cut short', async () => {
    await adapterFolder();
    tar('-cf', 'adapter.tar', '-C', 'adapter', 'adapter_model.safetensors');
    const whole = await readFile(path.join(work, 'adapter.tar'));
    expect(() => readTarGz(new Uint8Array(whole.subarray(0, 1024)))).toThrow(
      /Corrupt tar archive: adapter_model.safetensors is cut short/,
    );
  });
});
